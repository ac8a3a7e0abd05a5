"""result.json: assembled from spec.json, the rank events and the watcher samples on disk."""

from __future__ import annotations

from typing import Any

from rlhf_exp.checkpoints.files import checkpoint_bytes
from rlhf_exp.config.deepspeed import engine_settings, role_ds_config
from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.units import gib
from rlhf_exp.job.failure import LaunchOutcome, attribute
from rlhf_exp.jobdir import Failure, JobDir, JobSpec
from rlhf_exp.memory import kernel
from rlhf_exp.report.summary import summarize

CPU_NOTE = (
    "device=cpu: the host is the device. Weights a GPU run would move off the host stay in host "
    "memory, so host figures here include what would be GPU memory on a GPU host."
)


def job_meta(spec: JobSpec, job_dir: JobDir) -> dict[str, Any]:
    """What names a job in the table's title and the tracker."""
    return {"loader": spec.settings.loader.name, "gpus": spec.settings.gpus, "device": spec.device, "job_dir": str(job_dir.path)}


def _same_config(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "resume"} == {k: v for k, v in b.items() if k != "resume"}


def completed_result(job_dir: JobDir, config: dict[str, Any]) -> dict[str, Any] | None:
    """The job dir's result.json when it is complete and of this very config (`resume`), else None."""
    previous = job_dir.read_result()
    if not previous or previous.get("status") != "completed":
        return None
    return previous if _same_config(previous.get("config", {}), config) else None


def check_not_another_configs_result(job_dir: JobDir, config: dict[str, Any], key: str) -> None:
    """Refuse (one line) to run into a dir that holds the completed result of another config: it is never overwritten."""
    previous = job_dir.read_result()
    if previous and previous.get("status") == "completed" and not _same_config(previous.get("config", {}), config):
        raise ConfigError(
            f"{key}: {job_dir.path} holds the completed result of another config, kept; valid: another {key}, "
            f"or move {job_dir.result_file} away to run there"
        )


def record_config_error(job_dir: JobDir, error: ConfigError, config: dict[str, Any] | None) -> None:
    """A sweep job refused by a check still gets its result.json (failed at stage `config`)."""
    record_not_run(job_dir, "config", str(error), config)


def record_not_run(job_dir: JobDir, stage: str, reason: str, config: dict[str, Any] | None = None) -> None:
    """A job that never started (refused at `stage`: config, submit) gets its failed result.json, unless its dir
    holds a completed result, which is never overwritten."""
    previous = job_dir.read_result()
    if previous and previous.get("status") == "completed":
        return
    job_dir.path.mkdir(parents=True, exist_ok=True)
    failure = Failure(stage=stage, rank=None, reason=reason).to_dict()
    job_dir.write_result({"status": "failed", "job_dir": str(job_dir.path), "stages": [], "failure": failure, "config": config})


def watchdog_in_gib(record: dict[str, Any]) -> dict[str, Any]:
    """A node's watchdog record (memory/watchdog.py) with its byte figures in GiB."""
    trip = record.get("trip")
    figures = ("node_used", "climb", "projected")
    return {
        **{k: v for k, v in record.items() if k not in ("mem_total", "limit", "node_peak", "trip")},
        "mem_total_gib": gib(record["mem_total"], 3),
        "limit_gib": gib(record["limit"], 3) if record.get("limit") is not None else None,
        "node_peak_gib": gib(record["node_peak"], 3),
        "trip": {"t": trip["t"], **{f"{k}_gib": gib(trip[k], 3) for k in figures}} if trip else None,
    }


def status_of(outcome: LaunchOutcome) -> str:
    """completed; interrupted (a signal from outside: Ctrl-C, kill, the scheduler); or failed."""
    if outcome.ok:
        return "completed"
    return "interrupted" if outcome.stopped_by and not outcome.guard_stop else "failed"


def assemble_result(
    job_dir: JobDir, outcome: LaunchOutcome, wall_s: float, extra: dict[str, Any] | None = None, verdict: str | None = None
) -> dict[str, Any]:
    """result.json from what is on disk; written and returned.

    `verdict`: what killed the job from outside when no rank recorded an error of its own (e.g. SLURM's)."""
    spec = job_dir.read_spec()
    settings = spec.settings
    engines = {role: engine_settings(role_ds_config(settings, role, settings.gpus)) for role in settings.roles}
    result: dict[str, Any] = {
        "status": status_of(outcome),
        **job_meta(spec, job_dir),
        "backend": spec.backend,
        # what ran, read from each role's effective DeepSpeed config (a custom JSON's own stage, dtype, offload)
        "engines": engines,
        "zero_stages": {role: e["zero_stage"] for role, e in engines.items()},
        "dtype": engines[settings.roles[0]]["dtype"],
        "checkpoints": {k: str(v) for k, v in spec.checkpoints.items()},
        "checkpoint_gib": {k: gib(checkpoint_bytes(v)) for k, v in spec.checkpoints.items()},
        "host_total_gib": gib(kernel.node_total_bytes(), 3),
        **(extra or {}),
        "note": CPU_NOTE if spec.device == "cpu" else None,
        "wall_s": round(wall_s, 3),
        "plan": spec.plan,
        "failure": attribute(outcome, job_dir.read_events(), verdict),
        "watchdog": [watchdog_in_gib(r) for r in job_dir.read_watchdogs()],
        **summarize(job_dir),
        "config": spec.config,
        "run_id": spec.run_id,
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
            "failure": Failure(stage="prepare", rank=0, reason=verdict).to_dict(),
        }
        job_dir.path.mkdir(parents=True, exist_ok=True)
        job_dir.write_result(result)
        return result
    return assemble_result(job_dir, LaunchOutcome(ok=False), 0.0, {"launcher": "slurm"}, verdict)
