"""A job's memory over time: the watcher's samples against the ranks' stage windows, with the watchdog limit,
each stage's planned node peak and the failure. One definition for the HTML report and W&B."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlhf_exp.config.units import GIB
from rlhf_exp.jobdir import Failure, JobDir


@dataclass
class StageWindow:
    name: str
    start_s: float  # seconds since the first sample
    end_s: float
    status: str  # ok | failed | incomplete
    planned_node_gib: float | None  # the plan's node peak for this stage (above the baseline)


@dataclass
class Timeline:
    time_s: list[float] = field(default_factory=list)
    node_gib: list[float] = field(default_factory=list)  # MemTotal - MemAvailable above the baseline
    rank_pss_anon_gib: dict[str, list[float | None]] = field(default_factory=dict)
    rank_rss_gib: dict[str, list[float | None]] = field(default_factory=dict)
    gpu_used_gib: dict[str, list[float]] = field(default_factory=dict)  # NVML, per GPU index
    stages: list[StageWindow] = field(default_factory=list)
    limit_gib: float | None = None  # the watchdog's stop line, above the baseline
    failure: dict[str, Any] | None = None  # {"time_s", "stage", "reason"} where the job failed

    @property
    def empty(self) -> bool:
        return not self.time_s


def build_timeline(result: dict[str, Any]) -> Timeline:
    """The timeline of the job that wrote `result` (from its dir's samples and events)."""
    job_dir = JobDir(Path(result["job_dir"]))
    samples, events = job_dir.read_samples(), job_dir.read_events()
    line = Timeline()
    if not samples:
        return line
    t0, base = samples[0]["t"], samples[0]["node_used"]
    ranks = sorted({r for s in samples for r in s.get("ranks", {})}, key=int)
    for s in samples:
        line.time_s.append(round(s["t"] - t0, 3))
        line.node_gib.append((s["node_used"] - base) / GIB)
        for r in ranks:
            figures = s.get("ranks", {}).get(r)
            line.rank_pss_anon_gib.setdefault(r, []).append(figures["pss_anon"] / GIB if figures else None)
            line.rank_rss_gib.setdefault(r, []).append(figures["rss"] / GIB if figures else None)
        for i, used in enumerate(s.get("gpu_used", [])):
            line.gpu_used_gib.setdefault(str(i), []).append(used / GIB)
    planned = {st["stage"]: st["node_peak_gib"] for st in (result.get("plan") or {}).get("stages", [])}
    rows = {row["stage"]: row for row in result.get("stages", [])}
    last_t = samples[-1]["t"]
    for name in rows:
        begins = [ev["t"] for evs in events.values() for ev in evs if ev.get("stage") == name and ev.get("event") == "begin"]
        ends = [
            ev["t"] for evs in events.values() for ev in evs if ev.get("stage") == name and ev.get("event") in ("end", "error")
        ]
        if begins:
            end = max(ends) if len(ends) >= len(begins) else last_t
            line.stages.append(StageWindow(name, min(begins) - t0, end - t0, rows[name]["status"], planned.get(name)))
    fraction = ((result.get("config") or {}).get("watcher") or {}).get("max_node_fraction")
    if fraction and result.get("host_total_gib"):
        line.limit_gib = fraction * result["host_total_gib"] - base / GIB
    failure = Failure.from_dict(result.get("failure"))
    if failure and result.get("status") != "completed":
        window = next((w for w in line.stages if w.name == failure.stage), None)
        line.failure = {
            "time_s": window.end_s if window else line.time_s[-1],
            "stage": failure.stage,
            "reason": failure.reason[:200],
        }
    return line
