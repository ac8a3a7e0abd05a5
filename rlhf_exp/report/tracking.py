"""Experiment trackers behind one small Protocol; the job process (never a rank) owns the tracker.

W&B: one run per Hydra job, grouped by sweep, with the resolved config, per-stage summary keys
`mem/<stage>/<metric>`, the stage table as a wandb.Table and the watcher's time series against
seconds since start. wandb is imported lazily so runs without it never pay for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from rlhf_exp.config.units import GIB
from rlhf_exp.report.record import stage_columns, summary_key
from rlhf_exp.report.summary import load_time_s

# per-stage figures copied into the W&B summary as mem/<stage>/<key>
SUMMARY_KEYS = tuple(c.key for c in stage_columns(summary=True))
TABLE_COLUMNS = ("stage", "status", *SUMMARY_KEYS)


class Tracker(Protocol):
    def start(self, config: dict[str, Any], meta: dict[str, Any]) -> None: ...

    def finish(self, result: dict[str, Any], samples: list[dict[str, Any]]) -> None: ...


class NullTracker:
    """Tracks nothing (wandb.mode=disabled)."""

    def start(self, config: dict[str, Any], meta: dict[str, Any]) -> None:
        pass

    def finish(self, result: dict[str, Any], samples: list[dict[str, Any]]) -> None:
        pass


def summary_of(result: dict[str, Any]) -> dict[str, Any]:
    """The W&B summary of a result: status, failure and mem/<stage>/<metric> keys."""
    summary: dict[str, Any] = {
        "status": result["status"],
        "node_peak_gib": result.get("node_peak_gib"),
        "load_time_s": load_time_s(result),
    }
    if result.get("failure"):
        summary.update({f"failure/{k}": result["failure"][k] for k in ("stage", "rank", "reason", "signal")})
    for row in result.get("stages", []):
        summary.update({summary_key(row["stage"], k): row[k] for k in SUMMARY_KEYS if row.get(k) is not None})
    return summary


def series_of(samples: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Watcher samples as W&B rows against seconds since the first sample (above that first baseline)."""
    if not samples:
        return []
    t0, base = samples[0]["t"], samples[0]["node_used"]
    rows = []
    for s in samples:
        row = {"time_s": s["t"] - t0, "host/node_used_gib": (s["node_used"] - base) / GIB}
        if "cgroup_usage" in s:
            row["host/cgroup_gib"] = s["cgroup_usage"] / GIB
        for rank, r in s.get("ranks", {}).items():
            row[f"rank{rank}/pss_anon_gib"] = r["pss_anon"] / GIB
        for i, used in enumerate(s.get("gpu_used", [])):
            row[f"gpu{i}/nvml_used_gib"] = used / GIB
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
        )
        self.run.define_metric("time_s")
        self.run.define_metric("*", step_metric="time_s")

    def finish(self, result: dict[str, Any], samples: list[dict[str, Any]]) -> None:
        import wandb

        for row in series_of(samples):
            self.run.log(row)
        table = wandb.Table(columns=list(TABLE_COLUMNS))
        for row in result.get("stages", []):
            table.add_data(*(row.get(k) for k in TABLE_COLUMNS))
        self.run.log({"stages": table})
        self.run.summary.update(summary_of(result))
        self.run.finish(exit_code=0 if result["status"] == "completed" else 1)


def make_tracker(mode: str, project: str = "rlhf_exp", entity: str | None = None) -> Tracker:
    return NullTracker() if mode == "disabled" else WandbTracker(mode, project, entity)


def wandb_run_dirs(job_dir: Path) -> list[Path]:
    """The job's W&B run folders (offline-run-* or run-*)."""
    return sorted((job_dir / "wandb").glob("*run-*"))
