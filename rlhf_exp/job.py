"""One Hydra job = one experiment: validate, prepare checkpoints, launch ranks beside the watcher,
then write result.json and print the per-stage table. Read top to bottom: `run_job`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlhf_exp import kernel_memory
from rlhf_exp.checkpoints import checkpoint_bytes, resolve_checkpoint
from rlhf_exp.device import resolve_device
from rlhf_exp.launch import LaunchOutcome, launch_ranks, root_cause, start_watcher, stop_watcher
from rlhf_exp.results import GIB, failed_stage, first_error, read_events, read_samples, summarize
from rlhf_exp.settings import RunSettings, to_plain, validate
from rlhf_exp.table import print_result
from rlhf_exp.tracking import Tracker

CPU_NOTE = (
    "device=cpu: the host is the device. Weights a GPU run would move off the host stay in host "
    "memory, so host figures here include what would be GPU memory on a GPU host."
)


def prepare_checkpoints(settings: RunSettings) -> dict[str, Path]:
    """Actor and critic checkpoint dirs; presets are generated here, once, before ranks start."""
    m = settings.model
    return {
        "actor": resolve_checkpoint(m.actor.preset, m.actor.path, "causal_lm", m.checkpoint_dtype, m.cache_dir),
        "critic": resolve_checkpoint(m.critic.preset, m.critic.path, "value", m.checkpoint_dtype, m.cache_dir),
    }


def clear_job_dir(job_dir: Path) -> None:
    """Remove a previous run's records from a reused job dir, so events and samples are this run's alone."""
    job_dir.mkdir(parents=True, exist_ok=True)
    for name in ("events", "logs"):
        shutil.rmtree(job_dir / name, ignore_errors=True)
    for name in ("samples.jsonl", "stop", "result.json", "spec.json"):
        (job_dir / name).unlink(missing_ok=True)


def _failure(outcome: LaunchOutcome, events: dict[int, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """Who failed first, in which stage, and why: a rank's own error event, else the launcher's exit record."""
    if outcome.ok:
        return None
    error = first_error(events)
    cause = root_cause(outcome.failures)
    rank = error["rank"] if error else (cause.rank if cause else None)
    launcher = next((f for f in outcome.failures if f.rank == rank), cause)
    if error:
        reason = error["error"]
    elif launcher and launcher.signal:
        reason = f"killed by {launcher.signal}"
    else:
        reason = f"exit code {launcher.exitcode if launcher else '?'}"
    return {
        "rank": rank,
        "stage": failed_stage(events, rank),
        "reason": reason,
        "exitcode": launcher.exitcode if launcher else None,
        "signal": launcher.signal if launcher else None,
        "ranks_failed": [f.__dict__ for f in outcome.failures],
    }


def run_job(cfg: DictConfig, job_dir: Path, tracker: Tracker) -> dict[str, Any]:
    settings = validate(cfg)  # ConfigError (one line) before anything starts
    device, backend = resolve_device(settings)
    clear_job_dir(job_dir)
    checkpoints = prepare_checkpoints(settings)
    config = to_plain(cfg)
    spec = {
        "settings": settings.model_dump(),
        "device": device,
        "backend": backend,
        "checkpoints": {k: str(v) for k, v in checkpoints.items()},
    }
    (job_dir / "spec.json").write_text(json.dumps(spec, indent=1))
    meta = {"loader": settings.loader.name, "gpus": settings.gpus, "device": device, "job_dir": str(job_dir)}
    tracker.start(config, meta)

    cgroup = kernel_memory.CgroupMemory()
    cgroup_reset = cgroup.reset_peak()
    started = time.time()
    watcher = start_watcher(job_dir, settings.watcher.interval_s)
    try:
        outcome = launch_ranks(job_dir, settings.gpus, {"OMP_NUM_THREADS": "1"})
    finally:
        stop_watcher(watcher, job_dir)
    events = read_events(job_dir)
    failure = _failure(outcome, events)

    result: dict[str, Any] = {
        "status": "completed" if outcome.ok else "failed",
        **meta,
        "backend": backend,
        "zero_stages": {r: getattr(settings.zero, r).stage for r in ("actor", "ref", "critic", "reward")},
        "dtype": settings.dtype,
        "checkpoints": spec["checkpoints"],
        "checkpoint_gib": {k: round(checkpoint_bytes(v) / GIB, 4) for k, v in checkpoints.items()},
        "host_total_gib": round(kernel_memory.node_total_bytes() / GIB, 3),
        "cgroup": cgroup.describe(),
        "cgroup_hwm_gib": round(cgroup.peak_bytes() / GIB, 4) if cgroup_reset and cgroup.peak_bytes() else None,
        "note": CPU_NOTE if device == "cpu" else None,
        "wall_s": round(time.time() - started, 3),
        "failure": failure,
        **summarize(job_dir),
        "config": config,
        "result_file": str(job_dir / "result.json"),
    }
    (job_dir / "result.json").write_text(json.dumps(result, indent=1))
    print_result(result)
    tracker.finish(result, read_samples(job_dir))
    return result
