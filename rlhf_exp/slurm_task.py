"""A job whose ranks are SLURM tasks (submitted by the rlhf_slurm Hydra launcher).

Every task runs the Hydra job; here each becomes one rank: torch.distributed is set up from
the SLURM environment (submitit's TorchDistributedEnvironment). Global rank 0 prepares the job
(validation, checkpoints, spec.json) while the others wait for spec.json; each node's local rank
0 runs that node's watcher; after the final barrier rank 0 writes result.json. A rank that dies
makes srun kill the step (--kill-on-bad-exit), and the launcher then writes the failed result
from the records on disk.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlhf_exp.job import assemble_result, finish_crashed, job_meta, prepare_job
from rlhf_exp.launch import LaunchOutcome, start_watcher, stop_watcher
from rlhf_exp.results import read_samples
from rlhf_exp.table import print_result
from rlhf_exp.tracking import Tracker

TASK_MARKER = "RLHF_EXP_SLURM_TASKS"  # set by the launcher's sbatch setup lines


def ranks_are_slurm_tasks() -> bool:
    return os.environ.get(TASK_MARKER) == "1" and "SLURM_PROCID" in os.environ


def _wait_for_spec(job_dir: Path, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while not (job_dir / "spec.json").exists():
        if time.time() > deadline:
            raise TimeoutError(f"rank 0 wrote no {job_dir / 'spec.json'} within {timeout_s:.0f}s")
        time.sleep(0.2)


def run_as_slurm_task(cfg: DictConfig, job_dir: Path, tracker: Tracker, labels: dict[str, str]) -> dict[str, Any] | None:
    """This task's share of the job; returns the result on global rank 0, None elsewhere."""
    import submitit

    env = submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    node = int(os.environ.get("SLURM_NODEID", 0))
    if env.rank == 0:
        spec = prepare_job(cfg, job_dir)
        tracker.start(spec["config"], {**job_meta(spec, job_dir), **labels})
    else:
        _wait_for_spec(job_dir, timeout_s=float(cfg.job_timeout_s))
    watcher = None
    if env.local_rank == 0:  # one watcher per node; node 0's samples are the job's node-wide figures
        name = "samples.jsonl" if node == 0 else f"samples.node{node}.jsonl"
        watcher = start_watcher(job_dir, float(cfg.watcher.interval_s), env.local_world_size, name, cfg.watcher.max_node_fraction)
    started = time.time()
    try:
        from rlhf_exp import rank_main  # deepspeed: imported only where a rank runs

        rank_main.main(job_dir)
    except BaseException as exc:
        if env.rank == 0:
            finish_crashed(tracker, job_dir, exc)
        raise
    finally:
        if watcher is not None:
            stop_watcher(watcher, job_dir)
    if env.rank != 0:
        return None
    result = assemble_result(job_dir, LaunchOutcome(ok=True), time.time() - started, {"launcher": "slurm"})
    print_result(result)
    tracker.finish(result, read_samples(job_dir))
    return result
