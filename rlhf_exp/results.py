"""Turn a job's rank events and watcher samples into the per-stage table of result.json.

Stage windows are aligned across ranks (each stage starts with a barrier), so a stage's window
is [first rank's begin, last rank's end] and the node-wide figures are the watcher samples that
fall in it. Node and cgroup figures are reported above the baseline taken before ranks started.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlhf_exp.stages import is_load_stage

GIB = 1024**3
# what a stage reports about itself (rank 0's figures)
STAGE_FACTS = ("params", "trainable_params", "zero_stage", "tokens", "actor_loss", "critic_loss", "reward_mean", "kl")


def load_time_s(result: dict[str, Any]) -> float:
    """Seconds spent in the `.load` stages of a result: what the loaders cost in time."""
    return sum(s["duration_s"] or 0 for s in result.get("stages", []) if is_load_stage(s["stage"]))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All complete JSON lines of a file (a rank killed mid-write leaves a torn last line)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def gib(n: float | None) -> float | None:
    return None if n is None else round(n / GIB, 4)


def read_events(job_dir: Path) -> dict[int, list[dict[str, Any]]]:
    return {int(p.stem.removeprefix("rank")): read_jsonl(p) for p in sorted((job_dir / "events").glob("rank*.jsonl"))}


def read_samples(job_dir: Path) -> list[dict[str, Any]]:
    return [s for s in read_jsonl(job_dir / "samples.jsonl") if "header" not in s]


def stage_names(events: dict[int, list[dict[str, Any]]]) -> list[str]:
    names: list[str] = []
    for rank_events in events.values():
        for ev in rank_events:
            if ev.get("event") == "begin" and ev["stage"] not in names:
                names.append(ev["stage"])
    return names


def _max(values: list[float | int | None]) -> float | int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _rank_row(begin: dict[str, Any], end: dict[str, Any] | None, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One rank's figures for a stage; `end` is the end or error event (None: the rank died in it)."""
    rank = str(begin["rank"])
    mine = [s["ranks"][rank] for s in samples if rank in s.get("ranks", {})]
    sampled = [r["pss_anon"] for r in mine]
    last = end or begin
    row: dict[str, Any] = {
        "rank": begin["rank"],
        "pid": begin["pid"],
        "duration_s": end.get("duration_s") if end else None,
        "peak_rss_gib": gib(last["vmhwm"])
        if end
        else gib(_max([s["ranks"][rank]["rss"] for s in samples if rank in s.get("ranks", {})])),
        "rss_begin_gib": gib(begin["rss"]),
        "pss_anon_end_gib": gib(last["pss_anon"]),
        "pss_anon_peak_gib": gib(_max([*sampled, last["pss_anon"]])),
        "uss_end_gib": gib(last["uss"]),
        # file-backed pages mapped (a memory-mapped checkpoint) and bytes read by read(): who touched the file
        "rss_file_rise_gib": gib(
            _max([r.get("rss_file", 0) for r in mine] + [last.get("rss_file", 0)]) - begin.get("rss_file", 0)
        ),
        "read_gib": gib(last.get("rchar", 0) - begin.get("rchar", 0)),
    }
    for key in ("cuda_allocated", "cuda_reserved", "cuda_peak_allocated", "cuda_peak_reserved", "nvml_used"):
        if key in last:
            row[f"{key}_gib"] = gib(last[key])
    return row


def summarize_stage(
    name: str, events: dict[int, list[dict[str, Any]]], samples: list[dict[str, Any]], baseline: dict[str, Any]
) -> dict[str, Any]:
    begins = {r: ev for r, evs in events.items() for ev in evs if ev.get("stage") == name and ev["event"] == "begin"}
    ends = {r: ev for r, evs in events.items() for ev in evs if ev.get("stage") == name and ev["event"] in ("end", "error")}
    start = min(ev["t"] for ev in begins.values())
    stop = max((ev["t"] for ev in ends.values()), default=samples[-1]["t"] if samples else start)
    inside = [s for s in samples if start <= s["t"] <= stop]
    if not inside:  # a stage shorter than the sampling period: take the sample that follows it
        inside = [s for s in samples if s["t"] >= start][:1]
    ranks = [_rank_row(begins[r], ends.get(r), inside) for r in sorted(begins)]
    failed = any(ev["event"] == "error" for ev in ends.values())
    node_peak = _max([s["node_used"] for s in inside])
    cgroup_peak = _max([s.get("cgroup_usage") for s in inside])
    pss_sums = [sum(v["pss_anon"] for v in s.get("ranks", {}).values()) for s in inside]
    row: dict[str, Any] = {
        "stage": name,
        "status": "failed" if failed else ("ok" if len(ends) == len(begins) else "incomplete"),
        "ranks_begun": len(begins),
        "ranks_done": sum(1 for ev in ends.values() if ev["event"] == "end"),
        "duration_s": _max([r["duration_s"] for r in ranks]),
        "window_s": round(stop - start, 4),
        "samples": len(inside),
        "node_peak_gib": gib(node_peak - baseline["node_used"]) if node_peak is not None else None,
        # what this stage itself added at its peak: peak minus the level when it began
        "node_rise_gib": gib(node_peak - inside[0]["node_used"]) if node_peak is not None else None,
        "cgroup_peak_gib": (
            gib(cgroup_peak - baseline["cgroup_usage"]) if cgroup_peak is not None and "cgroup_usage" in baseline else None
        ),
        "rank_peak_rss_max_gib": _max([r["peak_rss_gib"] for r in ranks]),
        "rank_pss_anon_peak_max_gib": _max([r["pss_anon_peak_gib"] for r in ranks]),
        "pss_anon_sum_peak_gib": gib(_max([*pss_sums, sum(ev["pss_anon"] for ev in ends.values())])),
        "rank_uss_end_max_gib": _max([r["uss_end_gib"] for r in ranks]),
        "per_rank": ranks,
    }
    first_end = next((ev for _, ev in sorted(ends.items()) if ev["event"] == "end"), {})
    row.update({k: first_end[k] for k in STAGE_FACTS if k in first_end})
    for key in ("cuda_peak_allocated_gib", "cuda_reserved_gib", "nvml_used_gib"):
        value = _max([r.get(key) for r in ranks])
        if value is not None:
            row[f"gpu_{key}"] = value
    gpu_used = [max(s["gpu_used"]) for s in inside if s.get("gpu_used")]
    if gpu_used:
        row["gpu_nvml_peak_gib"] = gib(max(gpu_used))
    return row


def summarize(job_dir: Path) -> dict[str, Any]:
    """Per-stage rows plus whole-job peaks, from what is on disk (works for killed jobs too)."""
    events = read_events(job_dir)
    samples = read_samples(job_dir)
    if not samples:
        return {"stages": [], "baseline": {}}
    baseline = samples[0]
    stages = [summarize_stage(n, events, samples, baseline) for n in stage_names(events)]
    return {
        "stages": stages,
        "baseline": {"node_used_gib": gib(baseline["node_used"]), "cgroup_usage_gib": gib(baseline.get("cgroup_usage"))},
        "node_peak_gib": gib(max(s["node_used"] for s in samples) - baseline["node_used"]),
        "samples": len(samples),
    }


def failed_stage(events: dict[int, list[dict[str, Any]]], rank: int | None) -> str | None:
    """The stage a rank was in when it failed: its error event, else its last begun-but-unended stage."""
    candidates = [rank] if rank is not None and rank in events else sorted(events)
    for r in candidates:
        for ev in events[r]:
            if ev.get("event") == "error":
                return ev["stage"]
    for r in candidates:
        open_stages = [ev["stage"] for ev in events[r] if ev.get("event") == "begin"]
        closed = {ev["stage"] for ev in events[r] if ev.get("event") in ("end", "error")}
        unfinished = [s for s in open_stages if s not in closed]
        if unfinished:
            return unfinished[-1]
    return None


def first_error(events: dict[int, list[dict[str, Any]]]) -> dict[str, Any] | None:
    errors = [ev for evs in events.values() for ev in evs if ev.get("event") == "error"]
    return min(errors, key=lambda ev: ev["t"]) if errors else None


def stuck_rank(events: dict[int, list[dict[str, Any]]]) -> int | None:
    """A rank still inside a stage (last record a `begin`) while some peer is not: the one the others waited for."""
    inside = [r for r, evs in events.items() if evs and evs[-1].get("event") == "begin"]
    return min(inside) if inside and len(inside) < len(events) else None


def first_silent_rank(events: dict[int, list[dict[str, Any]]]) -> int | None:
    """Without exit records (ranks killed from outside): the rank whose records stopped first died first.

    A dead rank writes nothing more, while its peers go on to the next barrier before being killed.
    """
    unfinished = [r for r, evs in events.items() if evs and evs[-1].get("event") not in ("done",)]
    return min(unfinished, key=lambda r: events[r][-1]["t"], default=None)
