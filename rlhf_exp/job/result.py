"""result.json: assembled from spec.json, the rank events and the watcher samples on disk."""

from __future__ import annotations

from typing import Any

from rlhf_exp.checkpoints.files import checkpoint_bytes
from rlhf_exp.config.roles import ROLES
from rlhf_exp.config.units import gib
from rlhf_exp.job.failure import LaunchOutcome, attribute
from rlhf_exp.jobdir import JobDir, JobSpec
from rlhf_exp.memory import kernel
from rlhf_exp.report.summary import summarize

CPU_NOTE = (
    "device=cpu: the host is the device. Weights a GPU run would move off the host stay in host "
    "memory, so host figures here include what would be GPU memory on a GPU host."
)


def job_meta(spec: JobSpec, job_dir: JobDir) -> dict[str, Any]:
    """What names a job in the table's title and the tracker."""
    return {"loader": spec.settings.loader.name, "gpus": spec.settings.gpus, "device": spec.device, "job_dir": str(job_dir.path)}


def completed_result(job_dir: JobDir, config: dict[str, Any]) -> dict[str, Any] | None:
    """The job dir's result.json when it is complete and of this very config (`resume`), else None."""
    previous = job_dir.read_result()
    if not previous:
        return None
    same = {k: v for k, v in previous.get("config", {}).items() if k != "resume"} == {
        k: v for k, v in config.items() if k != "resume"
    }
    return previous if previous.get("status") == "completed" and same else None


def assemble_result(
    job_dir: JobDir, outcome: LaunchOutcome, wall_s: float, extra: dict[str, Any] | None = None, verdict: str | None = None
) -> dict[str, Any]:
    """result.json from what is on disk; written and returned.

    `verdict`: what killed the job from outside when no rank recorded an error of its own (e.g. SLURM's)."""
    spec = job_dir.read_spec()
    settings = spec.settings
    result: dict[str, Any] = {
        "status": "completed" if outcome.ok else "failed",
        **job_meta(spec, job_dir),
        "backend": spec.backend,
        "zero_stages": {r: getattr(settings.zero, r).stage for r in ROLES},
        "dtype": settings.dtype,
        "checkpoints": {k: str(v) for k, v in spec.checkpoints.items()},
        "checkpoint_gib": {k: gib(checkpoint_bytes(v)) for k, v in spec.checkpoints.items()},
        "host_total_gib": gib(kernel.node_total_bytes(), 3),
        **(extra or {}),
        "note": CPU_NOTE if spec.device == "cpu" else None,
        "wall_s": round(wall_s, 3),
        "plan": spec.plan,
        "failure": attribute(outcome, job_dir.read_events(), verdict),
        **summarize(job_dir),
        "config": spec.config,
        "result_file": str(job_dir.result_file),
    }
    job_dir.write_result(result)
    return result


def record_dead_job(job_dir: JobDir, verdict: str) -> dict[str, Any]:
    """result.json for a job killed from outside (a SLURM step that died): from whatever it recorded."""
    if not job_dir.has_spec():  # died before node 0 finished preparing
        result = {
            "status": "failed",
            "job_dir": str(job_dir.path),
            "stages": [],
            "failure": {"stage": "prepare", "rank": 0, "reason": verdict, "signal": None},
        }
        job_dir.path.mkdir(parents=True, exist_ok=True)
        job_dir.write_result(result)
        return result
    return assemble_result(job_dir, LaunchOutcome(ok=False), 0.0, {"launcher": "slurm"}, verdict)
