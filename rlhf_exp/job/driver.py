"""One Hydra job = one experiment, on one node or several. Read top to bottom: `run_job`.

The same driver runs locally and under SLURM (one job process per node: rlhf_exp/job/placement.py):
node 0 validates, prepares checkpoints and the plan (prepare.py) and writes spec.json; every node
then starts its watcher and its ranks under the job guard (guard.py); node 0 writes result.json
(result.py), prints the table and finishes the tracked run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch.distributed.elastic.multiprocessing.api import SignalException

from rlhf_exp.config.schema import RunSettings
from rlhf_exp.config.units import gib
from rlhf_exp.job.emulate import emulation_record, host_cap, oom_verdict
from rlhf_exp.job.failure import LaunchOutcome
from rlhf_exp.job.guard import JobGuard
from rlhf_exp.job.launch import launch_ranks, start_watcher, stop_watcher
from rlhf_exp.job.placement import Placement, placement_here
from rlhf_exp.job.prepare import plan_verdict, prepare_job
from rlhf_exp.job.progress import StageProgress
from rlhf_exp.job.result import assemble_result, check_not_another_configs_result, completed_result, job_meta
from rlhf_exp.jobdir import Failure, JobDir, JobSpec
from rlhf_exp.memory import kernel
from rlhf_exp.memory.emulation import CGROUP_ENV, remove_job_cgroup
from rlhf_exp.report.summary import summarize
from rlhf_exp.report.table import print_result
from rlhf_exp.report.tracking import Tracker


def run_job(
    settings: RunSettings,
    config: dict[str, Any],
    path: Path,
    tracker: Tracker,
    labels: dict[str, str] | None = None,
    dir_key: str = "hydra.run.dir",
) -> dict[str, Any] | None:
    """One job on this node; returns the result on node 0 (None on the others).

    `settings`: the validated config; `config`: the same as composed, plain (what result.json and resume compare).
    `labels`: group (the sweep), name (the job) and the chosen zero/model options, for the tracker; `dir_key`:
    the setting that named the job dir (for the one-line refusal to overwrite another config's result).
    Raises ConfigError (one line) before anything starts when a check fails."""
    placement = placement_here(settings.gpus)
    job_dir = JobDir(path)
    if not placement.first:  # node 0 prepares; this node runs its share of the ranks
        spec = job_dir.wait_for_spec(placement.run_id, settings.job_timeout_s)
        outcome, _ = measure(spec, job_dir, placement)
        if not outcome.ok:
            raise SystemExit(1)  # srun --kill-on-bad-exit then ends the other nodes' tasks
        return None
    previous = completed_result(job_dir, config) if settings.resume else None
    if previous:
        print(f"skipped: {path} holds a completed result of this config (resume=false runs it again)")
        return previous
    check_not_another_configs_result(job_dir, config, dir_key)
    spec = prepare_job(settings, config, job_dir, placement.run_id)
    print(plan_verdict(spec.plan))
    meta = {"group": "single", "name": path.name, "zero": "?", "model": "?", **job_meta(spec, job_dir), **(labels or {})}
    tracker.start(spec.config, meta)
    started = time.time()
    try:
        outcome, extra = measure(spec, job_dir, placement, lambda stage: tracker.stage_ended(job_dir, stage))
        result = assemble_result(job_dir, outcome, time.time() - started, extra, oom_verdict(extra["emulation"]))
    except BaseException as exc:  # the job itself broke: still close the tracked run, naming where
        finish_crashed(tracker, job_dir, exc)
        raise
    print_result(result)
    tracker.finish(result, job_dir.read_samples())
    return result


def finish_crashed(tracker: Tracker, job_dir: JobDir, exc: BaseException) -> None:
    failure = Failure(stage="job", rank=None, reason=repr(exc)[:500]).to_dict()
    tracker.finish({"status": "crashed", "failure": failure, **summarize(job_dir)}, job_dir.read_samples())


# torch's CPU allocator advises allocations of 2 MiB and more as transparent huge pages (where the kernel's THP mode
# is `madvise`, as on the H200 host): 512x fewer page faults when a rank first touches tens of GiB and fewer pages to
# free. On that host fresh pages cost 2 GiB/s per thread with 4 KiB pages, 5 with huge pages
# (bench/results/host-speed-2026-12-04). The bytes allocated, and so every memory figure, are the same.
RANK_ALLOCATOR = {"THP_MEM_ALLOC_ENABLE": "1"}


def measure(
    spec: JobSpec, job_dir: JobDir, placement: Placement, on_stage_end: Callable[[str], None] | None = None
) -> tuple[LaunchOutcome, dict[str, Any]]:
    """This node's ranks beside its watcher, under the guard; the outcome and the node's cgroup figures.
    `on_stage_end(stage)` as each stage ends (the tracker's live figures)."""
    settings = spec.settings
    cgroup = kernel.CgroupMemory()
    cgroup_reset = cgroup.reset_peak()
    host = host_cap(settings, f"rlhf_exp-{placement.run_id}-node{placement.node}")  # machine.emulate
    cap_gib = host.cap_gib if host and host.by == "watchdog" else None
    watcher = start_watcher(job_dir, settings.watcher, placement.ranks_per_node, placement.node, cap_gib)
    guard = JobGuard(job_dir, watcher, settings.job_timeout_s)
    try:
        threads = max(1, (os.cpu_count() or 1) // placement.ranks_per_node)  # ranks share the cores
        # the ranks inherit the job process's environment: set (or clear, for the next job of a sweep) the cgroup
        env = {"OMP_NUM_THREADS": str(threads), **RANK_ALLOCATOR, CGROUP_ENV: host.path if host and host.path else ""}
        try:
            with guard, StageProgress(job_dir, quiet=not placement.first, on_stage_end=on_stage_end):
                outcome = launch_ranks(job_dir, placement, env)
        except SignalException as err:  # the guard's SIGTERM landed just as the ranks finished
            outcome = LaunchOutcome(ok=False, stopped_by=err.sigval.name)
    finally:
        stop_watcher(watcher, job_dir)
        emulation = emulation_record(settings, spec.device, host)
        remove_job_cgroup(host.path if host else None)
    if not outcome.ok:  # the guard stopped it, or the watchdog killed the ranks before the guard looked: say why
        outcome.guard_stop = guard.stop or (guard.watchdog_stop() if not outcome.stopped_by else None)
    peak = cgroup.peak_bytes()
    extra = {
        "launcher": placement.scheduler or "local",
        "nodes": placement.nodes,
        "cgroup": cgroup.describe(),
        "cgroup_hwm_gib": gib(peak) if cgroup_reset and peak else None,
        "emulation": emulation,
    }
    return outcome, extra
