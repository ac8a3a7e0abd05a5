"""Stops a running job from inside its own process when something outside the ranks goes wrong.

Three things end a job this way: the watcher process died (its samples are the job's node-wide
record), the job outlived `job_timeout_s`, or the watcher's memory watchdog wrote a stop reason.
The guard sends SIGTERM to the job process; the elastic agent turns that into stopping every rank
(see launch.launch_ranks), and the reason recorded here becomes the job's failure reason. The same guard
runs in every node's job process, local or under SLURM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from torch.distributed.elastic.multiprocessing.api import SignalException

from rlhf_exp.job.failure import JobStop
from rlhf_exp.jobdir import JobDir


def raise_signal_exception(signum: int, frame: object) -> None:
    raise SignalException(f"Process {os.getpid()} got signal: {signum}", sigval=signal.Signals(signum))


def describe_exit(code: int) -> str:
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


class JobGuard:
    def __init__(self, job_dir: JobDir, watcher: subprocess.Popen, timeout_s: float, poll_s: float = 0.2) -> None:
        self.job_dir, self.watcher, self.poll_s = job_dir, watcher, poll_s
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.stop: JobStop | None = None  # set when the guard stopped the job
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="job-guard", daemon=True)

    def __enter__(self) -> JobGuard:
        # the guard's SIGTERM must always raise (never kill the sweep), also just after the ranks finished
        self._previous = signal.signal(signal.SIGTERM, raise_signal_exception)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done.set()
        self._thread.join()
        signal.signal(signal.SIGTERM, self._previous)

    def watchdog_stop(self) -> JobStop | None:
        """The watchdog's stop, once it has tripped (it also SIGKILLs the ranks itself: memory/watchdog.py)."""
        reason = self.job_dir.read_stop_reason()
        return JobStop(reason, process="watchdog") if reason else None

    def check(self) -> JobStop | None:
        """Why the job must stop now, or None."""
        watchdog = self.watchdog_stop()
        if watchdog:
            return watchdog
        code = self.watcher.poll()
        if code is not None:
            written = self.job_dir.read_watcher_error()
            error = f", {written[:300]}" if written else ""
            reason = f"watcher process died ({describe_exit(code)}{error}): node memory was no longer recorded"
            return JobStop(reason, process="watcher", signal=signal.Signals(-code).name if code < 0 else None)
        if time.monotonic() > self.deadline:
            return JobStop(f"job_timeout_s={self.timeout_s:g} exceeded")
        return None

    def _run(self) -> None:
        while not self._done.wait(self.poll_s):
            stop = self.check()
            if stop:
                with self._lock:
                    if self._done.is_set():
                        return
                    self.stop = stop
                    os.kill(os.getpid(), signal.SIGTERM)
                return
