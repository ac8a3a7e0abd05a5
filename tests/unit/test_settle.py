"""The node settles before a baseline (memory/settle.py), on this machine's real /proc/meminfo and /proc/zoneinfo."""

from __future__ import annotations

from rlhf_exp.config.units import GIB
from rlhf_exp.memory.kernel import PERCPU_FREE_LISTS
from rlhf_exp.memory.settle import Settled, settle_node


def test_a_node_within_the_spread_for_the_window_is_settled() -> None:
    settled = settle_node(window=3, interval_s=0.05, spread_bytes=1 << 40, limit_s=10)
    assert settled.steady and 0.1 <= settled.seconds < 5
    assert settled.used > 0 and PERCPU_FREE_LISTS in settled.moved and "MemAvailable" in settled.moved


def test_a_node_never_within_the_spread_stops_at_the_limit_still_moving() -> None:
    settled = settle_node(window=3, interval_s=0.05, spread_bytes=-1, limit_s=0.3)
    assert not settled.steady and 0.3 <= settled.seconds < 2
    assert settled.describe().startswith("node still moving in 0 s: ")


def test_the_line_names_what_moved_a_tenth_of_a_gib_or_more() -> None:
    moved = {"Dirty": -int(11.93 * GIB), PERCPU_FREE_LISTS: -int(0.8 * GIB), "Shmem": GIB // 20}
    line = Settled(True, 52.4, int(3.49 * GIB), -int(0.16 * GIB), moved).describe()
    assert line == "node settled in 52 s: 3.49 GiB used (-0.16; Dirty -11.93, PerCpuFreeLists -0.80)"
