"""One Hydra job = one experiment: validate, prepare checkpoints, launch ranks beside the watcher,
then write result.json and print the per-stage table. Read top to bottom: `run_job`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from torch.distributed.elastic.multiprocessing.api import SignalException

from rlhf_exp import kernel_memory
from rlhf_exp.checkpoint_checks import check_checkpoint
from rlhf_exp.checkpoints import checkpoint_bytes, resolve_checkpoint
from rlhf_exp.device import resolve_device
from rlhf_exp.job_guard import JobGuard
from rlhf_exp.launch import LaunchOutcome, launch_ranks, root_cause, start_watcher, stop_watcher
from rlhf_exp.plan_fit import choose, first_misfit, peak
from rlhf_exp.plan_inputs import plans_here
from rlhf_exp.results import (
    GIB,
    failed_stage,
    first_error,
    first_silent_rank,
    read_events,
    read_samples,
    stuck_rank,
    summarize,
)
from rlhf_exp.settings import ROLES, RunSettings, to_plain, validate
from rlhf_exp.table import print_result
from rlhf_exp.tracking import Tracker
from rlhf_exp.watcher import STOP_REASON_FILE, WATCHER_ERROR_FILE, WATCHER_PID_FILE

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
    for name in ("events", "logs", "weights"):
        shutil.rmtree(job_dir / name, ignore_errors=True)
    for name in (
        "samples.jsonl",
        "stop",
        "result.json",
        "spec.json",
        "plan.json",
        STOP_REASON_FILE,
        WATCHER_PID_FILE,
        WATCHER_ERROR_FILE,
    ):
        (job_dir / name).unlink(missing_ok=True)
    for extra in job_dir.glob("samples.node*.jsonl"):
        extra.unlink()


def _failure(outcome: LaunchOutcome, events: dict[int, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """Who failed first, in which stage, and why.

    In order: a rank's own error; a rank the launcher saw killed by a signal; a rank that stopped inside a
    stage while its peers failed waiting for it in a collective (hung, or died unseen under SLURM); the
    launcher's exit record; a peer's waiting error; the rank whose records stopped first.
    """
    if outcome.ok:
        return None
    failed = [f.__dict__ for f in outcome.failures]
    guard = outcome.guard_stop
    if guard and guard.process:  # not a rank's fault: name the process and the stage the ranks were in
        return {
            "rank": None,
            "process": guard.process,
            "stage": failed_stage(events, None) or "launch",  # "launch": before any rank began a stage
            "reason": f"job stopped: {guard.reason}",
            "exitcode": None,
            "signal": guard.signal,
            "ranks_failed": failed,
        }
    # a rank that failed in a collective (a barrier, a timeout) reports its peer's trouble, not its own
    own = first_error({r: [ev for ev in evs if not (ev.get("waiting") or ev.get("timeout"))] for r, evs in events.items()})
    peer = first_error(events) if own is None else None
    cause = root_cause(outcome.failures)
    stuck = stuck_rank(events)
    extra: dict[str, Any] = {}
    if own:
        rank, reason = own["rank"], own["error"]
        extra["own_error"] = True
    elif cause and cause.signal not in (None, "SIGTERM"):
        rank, reason = cause.rank, f"killed by {cause.signal}"
    elif peer and stuck is not None and stuck != peer["rank"]:
        rank, what = stuck, "timed out waiting for it" if peer.get("timeout") else "lost it"
        reason = f"rank {stuck} stopped in {failed_stage(events, stuck)}; rank {peer['rank']} {what}: {peer['error'][:300]}"
        extra["hung"] = bool(peer.get("timeout"))
    elif cause:
        rank, reason = cause.rank, f"exit code {cause.exitcode}"
    elif peer:
        rank, reason = peer["rank"], peer["error"]
    else:
        rank = stuck if stuck is not None else first_silent_rank(events)
        reason = "no rank recorded an error"
    if outcome.stopped_by and not own:
        reason = f"job stopped: {guard.reason}" if guard else f"job stopped by {outcome.stopped_by}"
    launcher = next((f for f in outcome.failures if f.rank == rank), None)
    return {
        "rank": rank,
        "stage": failed_stage(events, rank),
        "reason": reason,
        "exitcode": launcher.exitcode if launcher else None,
        "signal": launcher.signal if launcher else None,
        **extra,
        "ranks_failed": failed,
    }


def prepare_job(cfg: DictConfig, job_dir: Path, settings: RunSettings | None = None) -> dict[str, Any]:
    """Validate (unless the caller did: `settings`), pick device/backend, generate checkpoints and write
    spec.json: all before any rank starts."""
    settings = settings or validate(cfg)  # ConfigError (one line)
    device, backend = resolve_device(settings)
    clear_job_dir(job_dir)
    checkpoints = prepare_checkpoints(settings)
    for role, kind in (("actor", "causal_lm"), ("critic", "value")):
        source = "path" if getattr(settings.model, role).path else "preset"
        check_checkpoint(f"model.{role}.{source}", checkpoints[role], kind)
    settings, plan = plan_job(settings, device, checkpoints)
    (job_dir / "plan.json").write_text(json.dumps(plan, indent=1))
    spec = {
        "settings": settings.model_dump(),
        "plan": plan,
        "device": device,
        "backend": backend,
        "checkpoints": {k: str(v) for k, v in checkpoints.items()},
        "config": to_plain(cfg),
    }
    tmp = job_dir / "spec.json.tmp"
    tmp.write_text(json.dumps(spec, indent=1))
    tmp.rename(job_dir / "spec.json")  # atomic: SLURM tasks wait for it to appear
    return spec


def plan_job(settings: RunSettings, device: str, checkpoints: dict[str, Path]) -> tuple[RunSettings, dict[str, Any]]:
    """Plan every usable loader, pick the one to run (loader=auto, fit check) and return its plan.

    Raises ConfigError when the chosen plan does not fit this machine (plan.fit_check)."""
    plans, cap = plans_here(settings, device, dict(checkpoints))
    requested, loader = settings.loader.name, choose(settings, plans, cap)
    settings = settings.model_copy(update={"loader": settings.loader.model_copy(update={"name": loader})})
    misfit = first_misfit(plans[loader], cap)
    return settings, {
        **plans[loader].to_dict(),
        "requested_loader": requested,
        "capacity_host_gib": round(cap.host_bytes / GIB, 3),
        "capacity_gpu_gib": round(cap.gpu_bytes / GIB, 3) if cap.gpu_bytes else None,
        "fits": misfit is None,
        "first_misfit": misfit[0] if misfit else None,
        "others": {name: peak(plan) for name, plan in plans.items()},
    }


def job_meta(spec: dict[str, Any], job_dir: Path) -> dict[str, Any]:
    settings = spec["settings"]
    return {"loader": settings["loader"]["name"], "gpus": settings["gpus"], "device": spec["device"], "job_dir": str(job_dir)}


def completed_result(job_dir: Path, config: dict[str, Any]) -> dict[str, Any] | None:
    """The job dir's result.json when it is complete and of this very config (`resume`), else None."""
    path = job_dir / "result.json"
    if not path.exists():
        return None
    try:
        previous = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    same = {k: v for k, v in previous.get("config", {}).items() if k != "resume"} == {
        k: v for k, v in config.items() if k != "resume"
    }
    return previous if previous.get("status") == "completed" and same else None


def run_job(cfg: DictConfig, job_dir: Path, tracker: Tracker, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One local job. `labels`: group (the sweep), name (the job) and the chosen zero/model options, for the tracker."""
    settings = validate(cfg)
    previous = completed_result(job_dir, to_plain(cfg)) if settings.resume else None
    if previous:
        print(f"skipped: {job_dir} holds a completed result of this config (resume=false runs it again)")
        return previous
    spec = prepare_job(cfg, job_dir, settings)
    tracker.start(
        spec["config"],
        {"group": "single", "name": job_dir.name, "zero": "?", "model": "?", **job_meta(spec, job_dir), **(labels or {})},
    )
    try:
        result = measure(spec, job_dir)
    except BaseException as exc:  # the job itself broke: still close the tracked run, naming where
        finish_crashed(tracker, job_dir, exc)
        raise
    print_result(result)
    tracker.finish(result, read_samples(job_dir))
    return result


def finish_crashed(tracker: Tracker, job_dir: Path, exc: BaseException) -> None:
    failure = {"stage": "job", "rank": None, "reason": repr(exc)[:500], "signal": None}
    tracker.finish({"status": "crashed", "failure": failure, **summarize(job_dir)}, read_samples(job_dir))


def measure(spec: dict[str, Any], job_dir: Path) -> dict[str, Any]:
    """Launch the ranks on this host beside the watcher and assemble result.json from what they recorded."""
    settings = RunSettings.model_validate(spec["settings"])
    cgroup = kernel_memory.CgroupMemory()
    cgroup_reset = cgroup.reset_peak()
    started = time.time()
    watcher = start_watcher(
        job_dir, settings.watcher.interval_s, settings.gpus, max_node_fraction=settings.watcher.max_node_fraction
    )
    try:
        threads = max(1, (os.cpu_count() or 1) // settings.gpus)  # ranks share the cores
        guard = JobGuard(job_dir, watcher, settings.job_timeout_s)
        try:
            with guard:
                outcome = launch_ranks(job_dir, settings.gpus, {"OMP_NUM_THREADS": str(threads)})
        except SignalException as err:  # the guard's SIGTERM landed just as the ranks finished
            outcome = LaunchOutcome(ok=False, stopped_by=err.sigval.name)
    finally:
        stop_watcher(watcher, job_dir)
    extra = {
        "cgroup": cgroup.describe(),
        "cgroup_hwm_gib": round(cgroup.peak_bytes() / GIB, 4) if cgroup_reset and cgroup.peak_bytes() else None,
    }
    if guard.stop and outcome.stopped_by:  # the guard stopped it: say why, not just "SIGTERM"
        outcome.guard_stop = guard.stop
    return assemble_result(job_dir, outcome, time.time() - started, extra)


def record_dead_job(job_dir: Path, reason: str) -> dict[str, Any]:
    """result.json for a job whose ranks were killed from outside (SLURM): from whatever they recorded."""
    if not (job_dir / "spec.json").exists():  # died before rank 0 finished preparing
        result = {
            "status": "failed",
            "job_dir": str(job_dir),
            "stages": [],
            "failure": {"stage": "prepare", "rank": 0, "reason": reason, "signal": None},
        }
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / "result.json").write_text(json.dumps(result, indent=1))
        return result
    return assemble_result(job_dir, LaunchOutcome(ok=False), 0.0, {"launcher": "slurm"}, reason)


def assemble_result(
    job_dir: Path, outcome: LaunchOutcome, wall_s: float, extra: dict[str, Any] | None = None, reason: str | None = None
) -> dict[str, Any]:
    """result.json from spec.json, the rank events and the watcher samples on disk; written and returned.

    `reason`: why the job died when no rank recorded an error of its own (e.g. SLURM's verdict).
    """
    spec = json.loads((job_dir / "spec.json").read_text())
    settings = spec["settings"]
    events = read_events(job_dir)
    failure = _failure(outcome, events)
    own_error = failure.pop("own_error", False) if failure else False
    if failure and reason and not own_error:  # e.g. SLURM's verdict, before what the records say
        failure["reason"] = f"{reason}; {failure['reason']}"
    result: dict[str, Any] = {
        "status": "completed" if outcome.ok else "failed",
        **job_meta(spec, job_dir),
        "backend": spec["backend"],
        "zero_stages": {r: settings["zero"][r]["stage"] for r in ROLES},
        "dtype": settings["dtype"],
        "checkpoints": spec["checkpoints"],
        "checkpoint_gib": {k: round(checkpoint_bytes(Path(v)) / GIB, 4) for k, v in spec["checkpoints"].items()},
        "host_total_gib": round(kernel_memory.node_total_bytes() / GIB, 3),
        **(extra or {}),
        "note": CPU_NOTE if spec["device"] == "cpu" else None,
        "wall_s": round(wall_s, 3),
        "plan": spec.get("plan"),
        "failure": failure,
        **summarize(job_dir),
        "config": spec["config"],
        "result_file": str(job_dir / "result.json"),
    }
    (job_dir / "result.json").write_text(json.dumps(result, indent=1))
    return result
