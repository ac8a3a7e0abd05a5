"""Experiment trackers behind one small Protocol; the job process (never a rank) owns the tracker.

W&B: one run per Hydra job, grouped by sweep, with the resolved config, per-stage summary keys
`mem/<stage>/<metric>`, the stage table as a wandb.Table and the watcher's time series against
seconds since start. wandb is imported lazily so runs without it never pay for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from rlhf_exp.jobdir import Failure, JobDir
from rlhf_exp.records import Sample
from rlhf_exp.report.record import stage_columns, summary_key
from rlhf_exp.report.series import sample_series, stage_windows
from rlhf_exp.report.summary import load_time_s, meminfo_snapshots, summarize_stage
from rlhf_exp.report.timeline import build_timeline

# per-stage figures copied into the W&B summary as mem/<stage>/<key>
SUMMARY_KEYS = tuple(c.key for c in stage_columns(summary=True))
TABLE_COLUMNS = ("stage", "status", *SUMMARY_KEYS)


class Tracker(Protocol):
    def start(self, config: dict[str, Any], meta: dict[str, Any]) -> None: ...

    def stage_ended(self, job_dir: JobDir, stage: str) -> None: ...

    def finish(self, result: dict[str, Any], samples: list[Sample]) -> None: ...


class NullTracker:
    """Tracks nothing (wandb.mode=disabled)."""

    def start(self, config: dict[str, Any], meta: dict[str, Any]) -> None:
        pass

    def stage_ended(self, job_dir: JobDir, stage: str) -> None:
        pass

    def finish(self, result: dict[str, Any], samples: list[Sample]) -> None:
        pass


def summary_of(result: dict[str, Any]) -> dict[str, Any]:
    """The W&B summary of a result: status, failure and mem/<stage>/<metric> keys."""
    summary: dict[str, Any] = {
        "status": result["status"],
        "node_peak_gib": result.get("node_peak_gib"),
        "load_time_s": load_time_s(result),
    }
    failure = Failure.from_dict(result.get("failure"))
    if failure:
        summary.update({f"failure/{k}": getattr(failure, k) for k in ("stage", "rank", "reason", "signal")})
    for row in result.get("stages", []):
        summary.update({summary_key(row["stage"], k): row[k] for k in SUMMARY_KEYS if row.get(k) is not None})
    return summary


def series_of(samples: list[Sample]) -> list[dict[str, float]]:
    """Watcher samples as W&B rows against seconds since the first sample (report/series.py)."""
    series = sample_series(samples)
    rows = []
    for i, time_s in enumerate(series.time_s):
        row = {"time_s": time_s, "host/node_used_gib": series.node_gib[i]}
        if series.cgroup_gib[i] is not None:
            row["host/cgroup_gib"] = series.cgroup_gib[i]
        for name, by_rank in (("pss_anon_gib", series.rank_pss_anon_gib), ("rss_gib", series.rank_rss_gib)):
            row.update({f"rank{rank}/{name}": values[i] for rank, values in by_rank.items() if values[i] is not None})
        row.update({f"gpu{gpu}/nvml_used_gib": values[i] for gpu, values in series.gpu_used_gib.items()})
        rows.append(row)
    return rows


class WandbTracker:
    def __init__(self, mode: str, project: str, entity: str | None) -> None:
        self.mode, self.project, self.entity = mode, project, entity
        self.run: Any = None

    def start(self, config: dict[str, Any], meta: dict[str, Any]) -> None:
        import wandb

        self.run = wandb.init(
            project=self.project,
            entity=self.entity,
            mode=self.mode,
            dir=str(meta["job_dir"]),
            config=config,
            group=meta["group"],
            job_type=meta["loader"],
            name=meta["name"],
            tags=[f"loader={meta['loader']}", f"gpus={meta['gpus']}", f"zero={meta['zero']}", f"model={meta['model']}"],
            reinit="finish_previous",
            settings=wandb.Settings(silent=True, console="off"),  # no banner; the job's console stays its own
        )
        self.run.define_metric("time_s")
        self.run.define_metric("*", step_metric="time_s")

    def stage_ended(self, job_dir: JobDir, stage: str) -> None:
        """A stage's figures, logged as the stage ends (live charts while the job runs), as mem/<stage>/<metric>."""
        samples = job_dir.read_samples()
        window = next((w for w in stage_windows(job_dir.read_events(), samples) if w.name == stage), None)
        if window is None or not samples:
            return
        row = summarize_stage(window, samples, samples[0], meminfo_snapshots(samples)).to_dict()  # this stage's record alone
        figures = {summary_key(stage, k): row[k] for k in SUMMARY_KEYS if row.get(k) is not None}
        self.run.log({"time_s": round(samples[-1].t - samples[0].t, 3), **figures})

    def finish(self, result: dict[str, Any], samples: list[Sample]) -> None:
        import wandb

        rows = series_of(samples)
        for key in dict.fromkeys(k for row in rows for k in row if k != "time_s"):  # a series' summary: its peak
            self.run.define_metric(key, step_metric="time_s", summary="max")
        for row in rows:
            self.run.log(row)
        self._log_timeline(result)
        table = wandb.Table(columns=list(TABLE_COLUMNS))
        for row in result.get("stages", []):
            table.add_data(*(row.get(k) for k in TABLE_COLUMNS))
        self.run.log({"stages": table})
        self.run.summary.update(summary_of(result))
        self.run.finish(exit_code=0 if result["status"] == "completed" else 1)

    def _log_timeline(self, result: dict[str, Any]) -> None:
        """The report's memory timeline in W&B: stage windows (the bands, with their planned node peak) and a
        line chart of node and per-rank memory against time (the same series the run logs as history)."""
        import wandb

        line = build_timeline(result) if result.get("job_dir") else None
        if line is None or line.empty:
            return
        windows = wandb.Table(columns=["stage", "start_s", "end_s", "status", "planned_node_gib"])
        for w in line.stages:
            windows.add_data(w.name, w.start_s, w.end_s, w.status, w.planned_node_gib)
        series = line.series
        keys = ["node used", *(f"rank {r} Pss_Anon" for r in series.rank_pss_anon_gib)]
        ys = [series.node_gib, *([v or 0.0 for v in vs] for vs in series.rank_pss_anon_gib.values())]
        chart = wandb.plot.line_series(xs=series.time_s, ys=ys, keys=keys, title="host memory over time (GiB)", xname="time_s")
        self.run.log({"timeline/stages": windows, "timeline/host_memory": chart})
        if line.failure:
            self.run.summary.update({"timeline/failure_time_s": line.failure["time_s"]})


def make_tracker(mode: str, project: str = "rlhf_exp", entity: str | None = None) -> Tracker:
    return NullTracker() if mode == "disabled" else WandbTracker(mode, project, entity)


def wandb_run_dirs(job_dir: Path) -> list[Path]:
    """The job's W&B run folders (offline-run-* or run-*)."""
    return sorted((job_dir / "wandb").glob("*run-*"))


def sync_hint(path: Path, sweep: bool = False) -> str | None:
    """The console line that tells how to upload the offline W&B runs of a job (or every job of a sweep), or None."""
    pattern = "*/wandb/offline-run-*" if sweep else "wandb/offline-run-*"
    if not any(path.glob(pattern)):
        return None
    return f"W&B runs kept offline; to upload them: wandb sync {path}/{pattern}"
