"""Wait for the node's used memory to hold still before a job's baseline is taken.

Writing a checkpoint leaves the node moving for a minute and more: dirty pages are written back, and the pages the
writer freed sit on the per-CPU free lists (kernel.percpu_free_bytes), which MemAvailable leaves out, draining at
~10 MiB/s here. A baseline taken meanwhile puts every later node figure of the job low: the app's first run of the
llama-1.3b preset (generated in the job process) read its actor.load node peak 0.6-0.8 GiB under the second run's, as
0.7-1.0 GiB drained from those lists (bench/results/first-run-2026-12-07); the bench's 13B job after writing its
36.6 GiB pair read 1.1 GiB low on the H200 (bench/results/plan-vs-measured-2026-12-07).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from rlhf_exp.config.units import GIB
from rlhf_exp.memory.kernel import meminfo_snapshot, node_used_bytes

SHOWN_BYTES = GIB // 10  # fields that moved less are not named


@dataclass(frozen=True)
class Settled:
    steady: bool  # within the spread for the whole window (else the limit came first)
    seconds: float
    used: int  # the node's used memory at the end (kernel.node_used_bytes)
    change: int  # of the node's used memory, start to end
    moved: dict[str, int]  # kernel.meminfo_snapshot fields, start to end

    def describe(self) -> str:
        """One console line: how long, where the node ended, and what moved it."""
        shown = ", ".join(f"{k} {d / GIB:+.2f}" for k, d in self.moved.items() if abs(d) >= SHOWN_BYTES)
        return (
            f"node {'settled' if self.steady else 'still moving'} in {self.seconds:.0f} s: {self.used / GIB:.2f} GiB used"
            f" ({self.change / GIB:+.2f}{'; ' + shown if shown else ''})"
        )


def settle_node(window: int = 21, interval_s: float = 0.5, spread_bytes: int = 64 << 20, limit_s: float = 240) -> Settled:
    """Dirty pages synced, then wait until `window` samples `interval_s` apart lie within `spread_bytes` (10 s within
    64 MiB: a 2 s window took the lists' slow drain for steady, bench/results/settle-2026-12-07), or `limit_s`."""
    start, before, fields = time.monotonic(), node_used_bytes(), meminfo_snapshot()
    os.sync()
    recent = [node_used_bytes()]
    while time.monotonic() - start < limit_s and (len(recent) < window or max(recent) - min(recent) > spread_bytes):
        time.sleep(interval_s)
        recent = [*recent[-(window - 1) :], node_used_bytes()]
    moved = {k: v - fields[k] for k, v in meminfo_snapshot().items() if k in fields}
    steady = len(recent) >= window and max(recent) - min(recent) <= spread_bytes
    return Settled(steady, time.monotonic() - start, recent[-1], recent[-1] - before, moved)
