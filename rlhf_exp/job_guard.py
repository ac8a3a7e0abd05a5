"""Stops a running job from inside its own process when something outside the ranks goes wrong.

Three things end a job this way: the watcher process died (its samples are the job's node-wide
record), the job outlived `job_timeout_s`, or the watcher's memory watchdog wrote a stop reason.
The guard sends SIGTERM to the job process; the elastic agent turns that into stopping every rank
(see launch.launch_ranks), and the reason recorded here becomes the job's failure reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from rlhf_exp.launch import raise_signal_exception
from rlhf_exp.watcher import STOP_REASON_FILE, WATCHER_ERROR_FILE


def describe_exit(code: int | None) -> str:
    if code is None:
        return "running"
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


class JobGuard:
    def __init__(self, job_dir: Path, watcher: subprocess.Popen, timeout_s: float, poll_s: float = 0.2) -> None:
        self.job_dir, self.watcher, self.poll_s = job_dir, watcher, poll_s
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.reason: str | None = None
        self.signal: str | None = None
        self.process: str | None = None  # set when a process other than a rank caused the stop
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

    def check(self) -> str | None:
        """Why the job must stop now, or None."""
        stop_file = self.job_dir / STOP_REASON_FILE
        if stop_file.exists():
            self.process = "watchdog"
            return json.loads(stop_file.read_text())["reason"]
        code = self.watcher.poll()
        if code is not None:
            self.signal = signal.Signals(-code).name if code < 0 else None
            self.process = "watcher"
            error_file = self.job_dir / WATCHER_ERROR_FILE
            error = f", {error_file.read_text()[:300]}" if error_file.exists() else ""
            return f"watcher process died ({describe_exit(code)}{error}): node memory was no longer recorded"
        if time.monotonic() > self.deadline:
            return f"job_timeout_s={self.timeout_s:g} exceeded"
        return None

    def _run(self) -> None:
        while not self._done.wait(self.poll_s):
            reason = self.check()
            if reason:
                with self._lock:
                    if self._done.is_set():
                        return
                    self.reason = reason
                    os.kill(os.getpid(), signal.SIGTERM)
                return
