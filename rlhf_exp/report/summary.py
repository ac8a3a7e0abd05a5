"""Turn a job's rank events and watcher samples into its per-stage records (report/record.py).

Stage windows are aligned across ranks (each stage starts with a barrier), so a stage's window
is [first rank's begin, last rank's end] and the node-wide figures are the watcher samples that
fall in it. Node and cgroup figures are reported above the baseline taken before ranks started.
"""

from __future__ import annotations

from typing import Any

from rlhf_exp.config.stages import is_load_stage
from rlhf_exp.config.units import gib
from rlhf_exp.jobdir import JobDir
from rlhf_exp.report.record import RANK_GPU_FIGURES, STAGE_FACTS, RankRecord, StageRecord

Events = dict[int, list[dict[str, Any]]]


def load_time_s(result: dict[str, Any]) -> float:
    """Seconds spent in the `.load` stages of a result: what the loaders cost in time."""
    return sum(s["duration_s"] or 0 for s in result.get("stages", []) if is_load_stage(s["stage"]))


def stage_names(events: Events) -> list[str]:
    names: list[str] = []
    for rank_events in events.values():
        for ev in rank_events:
            if ev.get("event") == "begin" and ev["stage"] not in names:
                names.append(ev["stage"])
    return names


def _max(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def rank_record(begin: dict[str, Any], end: dict[str, Any] | None, samples: list[dict[str, Any]]) -> RankRecord:
    """One rank's figures for a stage; `end` is the end or error event (None: the rank died in it)."""
    rank = str(begin["rank"])
    mine = [s["ranks"][rank] for s in samples if rank in s.get("ranks", {})]
    last = end or begin
    record = RankRecord(
        rank=begin["rank"],
        pid=begin["pid"],
        duration_s=end.get("duration_s") if end else None,
        # a rank that died in the stage wrote no VmHWM: the largest RSS the watcher saw stands in
        peak_rss_gib=gib(last["vmhwm"]) if end else gib(_max([r["rss"] for r in mine])),
        rss_begin_gib=gib(begin["rss"]),
        pss_anon_end_gib=gib(last["pss_anon"]),
        pss_anon_peak_gib=gib(_max([*(r["pss_anon"] for r in mine), last["pss_anon"]])),
        uss_end_gib=gib(last["uss"]),
        rss_file_rise_gib=gib(_max([r.get("rss_file", 0) for r in mine] + [last.get("rss_file", 0)]) - begin.get("rss_file", 0)),
        read_gib=gib(last.get("rchar", 0) - begin.get("rchar", 0)),
    )
    for key in RANK_GPU_FIGURES:
        if key in last:
            setattr(record, f"{key}_gib", gib(last[key]))
    return record


def _rank_dict(record: RankRecord) -> dict[str, Any]:
    """A rank's row as stored: GPU figures only where a GPU was used."""
    return {k: v for k, v in vars(record).items() if v is not None or not k.startswith(("cuda_", "nvml_"))}


def summarize_stage(name: str, events: Events, samples: list[dict[str, Any]], baseline: dict[str, Any]) -> StageRecord:
    begins = {r: ev for r, evs in events.items() for ev in evs if ev.get("stage") == name and ev["event"] == "begin"}
    ends = {r: ev for r, evs in events.items() for ev in evs if ev.get("stage") == name and ev["event"] in ("end", "error")}
    start = min(ev["t"] for ev in begins.values())
    stop = max((ev["t"] for ev in ends.values()), default=samples[-1]["t"] if samples else start)
    inside = [s for s in samples if start <= s["t"] <= stop]
    if not inside:  # a stage shorter than the sampling period: take the sample that follows it
        inside = [s for s in samples if s["t"] >= start][:1]
    ranks = [rank_record(begins[r], ends.get(r), inside) for r in sorted(begins)]
    failed = any(ev["event"] == "error" for ev in ends.values())
    node_peak = _max([s["node_used"] for s in inside])
    cgroup_peak = _max([s.get("cgroup_usage") for s in inside])
    pss_sums = [sum(v["pss_anon"] for v in s.get("ranks", {}).values()) for s in inside]
    gpu_used = [max(s["gpu_used"]) for s in inside if s.get("gpu_used")]
    first_end = next((ev for _, ev in sorted(ends.items()) if ev["event"] == "end"), {})
    return StageRecord(
        stage=name,
        status="failed" if failed else ("ok" if len(ends) == len(begins) else "incomplete"),
        ranks_begun=len(begins),
        ranks_done=sum(1 for ev in ends.values() if ev["event"] == "end"),
        duration_s=_max([r.duration_s for r in ranks]),
        window_s=round(stop - start, 4),
        samples=len(inside),
        node_peak_gib=gib(node_peak - baseline["node_used"]) if node_peak is not None else None,
        node_rise_gib=gib(node_peak - inside[0]["node_used"]) if node_peak is not None else None,
        cgroup_peak_gib=(
            gib(cgroup_peak - baseline["cgroup_usage"]) if cgroup_peak is not None and "cgroup_usage" in baseline else None
        ),
        rank_peak_rss_max_gib=_max([r.peak_rss_gib for r in ranks]),
        rank_pss_anon_peak_max_gib=_max([r.pss_anon_peak_gib for r in ranks]),
        pss_anon_sum_peak_gib=gib(_max([*pss_sums, sum(ev["pss_anon"] for ev in ends.values())])),
        rank_uss_end_max_gib=_max([r.uss_end_gib for r in ranks]),
        gpu_cuda_peak_allocated_gib=_max([r.cuda_peak_allocated_gib for r in ranks]),
        gpu_cuda_reserved_gib=_max([r.cuda_reserved_gib for r in ranks]),
        gpu_nvml_used_gib=_max([r.nvml_used_gib for r in ranks]),
        gpu_nvml_peak_gib=gib(max(gpu_used)) if gpu_used else None,
        **{k: first_end[k] for k in STAGE_FACTS if k in first_end},
        per_rank=[_rank_dict(r) for r in ranks],
    )


def summarize(job_dir: JobDir) -> dict[str, Any]:
    """Per-stage rows plus whole-job peaks, from what is on disk (works for killed jobs too)."""
    return summarize_records(job_dir.read_events(), job_dir.read_samples())


def summarize_records(events: Events, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The result's `stages`, `baseline`, `node_peak_gib` and `samples` from events and samples."""
    if not samples:
        return {"stages": [], "baseline": {}}
    baseline = samples[0]
    stages = [summarize_stage(n, events, samples, baseline).to_dict() for n in stage_names(events)]
    return {
        "stages": stages,
        "baseline": {"node_used_gib": gib(baseline["node_used"]), "cgroup_usage_gib": gib(baseline.get("cgroup_usage"))},
        "node_peak_gib": gib(max(s["node_used"] for s in samples) - baseline["node_used"]),
        "samples": len(samples),
    }
