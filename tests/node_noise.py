"""The machine's noise in node-wide figures, measured beside a job: what other processes do to the node's used
memory while the job runs.

A node figure (MemTotal - MemAvailable) holds every process of the machine; a CI box is shared. While the job
runs, a thread samples the node's used memory minus the non-file RSS of this test's own process tree (the job,
its ranks and watcher): what is left is the rest of the machine plus kernel overhead, and its swing over the run
is the allowance a node-wide assertion gets. Measured, never assumed: on a quiet box it is a few MiB, under the
CI stress helper (tests/memory_stress.py) about its 1 GiB.
"""

from __future__ import annotations

import os
import threading
import time

import psutil

from rlhf_exp.config.units import GIB
from rlhf_exp.memory import kernel


def own_tree_bytes() -> int:
    """Resident memory not backed by files (VmRSS - RssFile: anonymous and shared) of this process and every
    descendant (the job under test)."""
    total = 0
    me = psutil.Process(os.getpid())
    for proc in (me, *me.children(recursive=True)):
        status = kernel.process_status(proc.pid)  # empty when it exited between the listing and the read
        total += status.get("VmRSS", 0) - status.get("RssFile", 0)
    return total


class NodeNoise:
    """`with NodeNoise() as noise: run the job`; then `noise.gib`: the swing of the rest of the machine's memory."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.low = self.high = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            other = kernel.node_used_bytes() - own_tree_bytes()
            self.low = other if self.low is None else min(self.low, other)
            self.high = other if self.high is None else max(self.high, other)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> NodeNoise:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def gib(self) -> float:
        return 0.0 if self.low is None else (self.high - self.low) / GIB


if __name__ == "__main__":  # the machine's noise over 5 s, beside whatever runs
    with NodeNoise() as noise:
        time.sleep(5)
    print(f"node noise over 5 s: {noise.gib:.3f} GiB")
