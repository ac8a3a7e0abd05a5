"""Start this node's ranks with torch's elastic launcher, beside this node's watcher process.

The job process is the elastic agent: it starts this node's ranks of rlhf_exp.rank.main, and when one
fails (raises, or is killed as the OOM killer does) it stops the others at once, so a job never
hangs its sweep. Per-rank stdout/stderr go to <job_dir>/logs only; the console shows the job's progress.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from rlhf_exp.config.schema import WatcherSettings
from rlhf_exp.job.failure import LaunchOutcome, RankFailure
from rlhf_exp.job.placement import Placement
from rlhf_exp.jobdir import JobDir


def start_watcher(
    job_dir: JobDir, watcher: WatcherSettings, ranks: int, node: int = 0, cap_gib: float | None = None
) -> subprocess.Popen:
    """Start the watcher and wait for its first sample (the baseline) before any rank starts. `cap_gib`: the
    emulated host cap the watchdog holds the job to (machine.emulate without a cgroup)."""
    watchdog = ["--lead-s", str(watcher.lead_s)]
    if watcher.max_node_fraction is not None:
        watchdog += ["--max-node-fraction", str(watcher.max_node_fraction)]
    if cap_gib is not None:
        watchdog += ["--cap-gib", str(cap_gib)]
    interval_s = watcher.interval_s
    args = ["--parent", str(os.getpid()), "--interval", str(interval_s), "--ranks", str(ranks), "--node", str(node)]
    proc = subprocess.Popen([sys.executable, "-m", "rlhf_exp.memory.watcher", str(job_dir.path), *args, *watchdog])
    job_dir.write_watcher_pid(proc.pid)
    samples = job_dir.samples_file(node)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if samples.exists() and samples.read_text().count("\n") >= 2:
            return proc
        time.sleep(0.05)
    raise RuntimeError(f"watcher did not start (exit {proc.poll()})")


def stop_watcher(proc: subprocess.Popen, job_dir: JobDir) -> None:
    if proc.poll() is not None:
        return
    job_dir.request_watcher_stop()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _failures(err: ChildFailedError) -> list[RankFailure]:
    out = []
    for rank, failure in sorted(err.failures.items()):
        signal = failure.signal_name() if failure.exitcode < 0 else None
        out.append(RankFailure(rank, failure.exitcode, signal, str(failure.message), failure.timestamp))
    return out


def elastic_logs_to_job_log() -> None:
    """torch.distributed's logger prints its agent's stop ("Received 15 death signal, shutting down workers", each
    worker signalled) on the console through a handler of its own: into the job's log instead, where Hydra's job
    logging writes library logs (the root logger's handlers). The console keeps the job's one-line outcome."""
    handlers = logging.getLogger().handlers
    if handlers:  # outside a Hydra job (nothing configured) torch's own handler stays
        logging.getLogger("torch.distributed").handlers = list(handlers)


def launch_ranks(job_dir: JobDir, placement: Placement, env: dict[str, str]) -> LaunchOutcome:
    """Run this node's ranks to completion; failures carry rank, exit code and signal.

    Call it under a JobGuard: the guard makes SIGTERM raise SignalException (also before the agent installs
    its own handler, during rendezvous), which ends here as `stopped_by`.
    """
    config = LaunchConfig(
        min_nodes=placement.nodes,
        max_nodes=placement.nodes,
        nproc_per_node=placement.ranks_per_node,
        run_id=placement.run_id,
        rdzv_backend="c10d",
        rdzv_endpoint=placement.rdzv_endpoint,
        rdzv_configs={"is_host": placement.first},
        max_restarts=0,
        monitor_interval=0.2,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(job_dir.logs_dir), redirects=Std.ALL, tee=Std.NONE),  # progress: job/progress.py
        local_addr=placement.local_addr,
    )
    os.environ.update(env)  # inherited by the ranks
    elastic_logs_to_job_log()
    try:
        elastic_launch(config, sys.executable)("-u", "-m", "rlhf_exp.rank.main", str(job_dir.path))
    except ChildFailedError as err:
        return LaunchOutcome(ok=False, failures=_failures(err), log_dir=job_dir.logs_dir)
    except SignalException as err:  # the job process itself was signalled: the agent has stopped the ranks
        return LaunchOutcome(ok=False, log_dir=job_dir.logs_dir, stopped_by=err.sigval.name)
    except KeyboardInterrupt:  # Ctrl-C before the agent installed its handlers (rendezvous): no rank is running yet
        return LaunchOutcome(ok=False, log_dir=job_dir.logs_dir, stopped_by="SIGINT")
    return LaunchOutcome(ok=True, log_dir=job_dir.logs_dir)
