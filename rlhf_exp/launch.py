"""Start a job's ranks with torch's elastic launcher, beside a watcher process.

The job process is the elastic agent: it starts `gpus` ranks of rlhf_exp.rank_main, and when one
fails (raises, or is killed as the OOM killer does) it stops the others at once, so a job never
hangs its sweep. Per-rank stdout/stderr go to <job_dir>/logs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from rlhf_exp.watcher import WATCHER_PID_FILE


@dataclass
class RankFailure:
    rank: int
    exitcode: int
    signal: str | None
    message: str
    timestamp: float


@dataclass
class LaunchOutcome:
    ok: bool
    failures: list[RankFailure] = field(default_factory=list)
    log_dir: Path | None = None
    stopped_by: str | None = None  # the signal that stopped the whole job (SIGTERM from a scheduler or the guard)
    guard_stop: JobStop | None = None  # why the job guard sent it


@dataclass
class JobStop:
    """Why the job guard stopped a job: something outside the ranks."""

    reason: str
    process: str | None = None  # the process at fault (watcher, watchdog); None for the job's own limit
    signal: str | None = None  # how that process died


def start_watcher(
    job_dir: Path, interval_s: float, ranks: int, out_name: str = "samples.jsonl", max_node_fraction: float | None = None
) -> subprocess.Popen:
    """Start the watcher and wait for its first sample (the baseline) before any rank starts."""
    watchdog = [] if max_node_fraction is None else ["--max-node-fraction", str(max_node_fraction)]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlhf_exp.watcher",
            str(job_dir),
            "--parent",
            str(os.getpid()),
            "--interval",
            str(interval_s),
            "--out",
            out_name,
            "--ranks",
            str(ranks),
            *watchdog,
        ],
    )
    (job_dir / WATCHER_PID_FILE).write_text(str(proc.pid))
    samples = job_dir / out_name
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if samples.exists() and samples.read_text().count("\n") >= 2:
            return proc
        time.sleep(0.05)
    raise RuntimeError(f"watcher did not start (exit {proc.poll()})")


def stop_watcher(proc: subprocess.Popen, job_dir: Path) -> None:
    if proc.poll() is not None:
        return
    (job_dir / "stop").touch()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def root_cause(failures: list[RankFailure]) -> RankFailure | None:
    """The rank that failed first. Ranks the agent stopped itself (SIGTERM) are consequences, not causes."""
    own = [f for f in failures if f.signal != "SIGTERM"] or failures
    return min(own, key=lambda f: f.timestamp, default=None)


def _failures(err: ChildFailedError) -> list[RankFailure]:
    out = []
    for rank, failure in sorted(err.failures.items()):
        signal = failure.signal_name() if failure.exitcode < 0 else None
        out.append(
            RankFailure(
                rank=rank, exitcode=failure.exitcode, signal=signal, message=str(failure.message), timestamp=failure.timestamp
            )
        )
    return out


def launch_ranks(job_dir: Path, nprocs: int, env: dict[str, str]) -> LaunchOutcome:
    """Run `nprocs` ranks on this host to completion; failures carry rank, exit code and signal.

    Call it under a JobGuard: the guard makes SIGTERM raise SignalException (also before the agent installs
    its own handler, during rendezvous), which ends here as `stopped_by`.
    """
    log_dir = job_dir / "logs"
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nprocs,
        run_id=f"rlhf_exp-{uuid.uuid4().hex[:8]}",
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        monitor_interval=0.2,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir), redirects=Std.ALL, tee=Std.ERR),
        local_addr="127.0.0.1",
    )
    os.environ.update(env)  # inherited by the ranks
    try:
        elastic_launch(config, sys.executable)("-u", "-m", "rlhf_exp.rank_main", str(job_dir))
    except ChildFailedError as err:
        return LaunchOutcome(ok=False, failures=_failures(err), log_dir=log_dir)
    except SignalException as err:  # the job process itself was signalled: the agent has stopped the ranks
        return LaunchOutcome(ok=False, log_dir=log_dir, stopped_by=err.sigval.name)
    return LaunchOutcome(ok=True, log_dir=log_dir)
