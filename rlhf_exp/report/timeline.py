"""A job's memory over time: the watcher's samples against the ranks' stage windows, with the watchdog limit,
each stage's planned node peak and the failure. One definition for the HTML report and W&B."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlhf_exp.config.units import GIB
from rlhf_exp.jobdir import Failure, JobDir
from rlhf_exp.plan.terms import plan_stages
from rlhf_exp.report.series import Series, sample_series, stage_windows


@dataclass
class Band:
    """A stage's window as drawn."""

    name: str
    start_s: float  # seconds since the first sample
    end_s: float
    status: str  # ok | failed | incomplete
    planned_node_gib: float | None  # the plan's node peak for this stage (above the baseline)


@dataclass
class Timeline:
    series: Series = field(default_factory=Series)
    stages: list[Band] = field(default_factory=list)
    limit_gib: float | None = None  # the watchdog's stop line, above the baseline
    failure: dict[str, Any] | None = None  # {"time_s", "stage", "reason"} where the job failed

    @property
    def empty(self) -> bool:
        return not self.series.time_s


def build_timeline(result: dict[str, Any]) -> Timeline:
    """The timeline of the job that wrote `result` (from its dir's samples and events)."""
    job_dir = JobDir(Path(result["job_dir"]))
    samples = job_dir.read_samples()
    if not samples:
        return Timeline()
    line = Timeline(series=sample_series(samples))
    t0, base = line.series.t0, samples[0].node_used
    planned = {st.stage: st.node_peak_gib for st in plan_stages(result.get("plan"))}
    for w in stage_windows(job_dir.read_events(), samples):
        line.stages.append(Band(w.name, w.start - t0, w.stop - t0, w.status, planned.get(w.name)))
    fraction = ((result.get("config") or {}).get("watcher") or {}).get("max_node_fraction")
    if fraction and result.get("host_total_gib"):
        line.limit_gib = fraction * result["host_total_gib"] - base / GIB
    failure = Failure.from_dict(result.get("failure"))
    if failure and result.get("status") != "completed":
        band = next((b for b in line.stages if b.name == failure.stage), None)
        line.failure = {
            "time_s": band.end_s if band else line.series.time_s[-1],
            "stage": failure.stage,
            "reason": failure.reason[:200],
        }
    return line
