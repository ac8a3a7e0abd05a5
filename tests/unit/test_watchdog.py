"""The watchdog trips on the projected node figure and SIGKILLs the ranks itself, on this machine's real meminfo."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from rlhf_exp.config.units import GIB
from rlhf_exp.jobdir import JobDir
from rlhf_exp.memory import kernel
from rlhf_exp.memory.watchdog import Watchdog, projected_trip


def test_the_projection_adds_the_recent_climb_and_ignores_a_fall() -> None:
    flat = deque([(0.0, 10 * GIB), (0.1, 10 * GIB), (0.2, 10 * GIB)])
    assert projected_trip(flat, 11 * GIB) is None
    climbing = deque([(0.0, 9 * GIB), (0.1, 10 * GIB), (0.2, 10 * GIB + GIB // 2)])
    trip = projected_trip(climbing, 11 * GIB)  # 10.5 now, 1.5 GiB up in the window: 12 projected
    assert trip is not None and trip.climb == GIB + GIB // 2 and trip.projected == 12 * GIB
    falling = deque([(0.0, 12 * GIB), (0.1, 10 * GIB)])
    assert projected_trip(falling, 11 * GIB) is None
    assert projected_trip(deque([(0.0, 11 * GIB)]), 11 * GIB) is not None  # at the limit: trips


def test_a_tripped_watchdog_leaves_its_reason_and_kills_the_ranks(tmp_path: Path) -> None:
    """A real process stands in for a rank; the limit sits below what the node already uses, so the first poll trips."""
    job_dir = JobDir(tmp_path)
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    fraction = 0.5 * kernel.node_used_bytes() / kernel.node_total_bytes()
    watchdog = Watchdog(job_dir, node=0, ranks=lambda: {0: rank.pid}, max_fraction=fraction, lead_s=0.2)
    watchdog.start()
    try:
        assert rank.wait(timeout=10) == -9  # SIGKILL
    finally:
        rank.kill()
    time.sleep(0.05)
    record = watchdog.finish()
    assert record.killed == [0] and record.trip is not None and record.trip.node_used >= record.limit // 2
    assert record.polls >= 1 and record.node_peak >= record.trip.node_used
    assert record.oom_kills in (0, None)
    reason = json.loads((tmp_path / "stop_reason.json").read_text())["reason"]
    assert reason.startswith("watchdog: node memory") and "watcher.max_node_fraction" in reason and "[0] killed" in reason


def test_an_untripped_watchdog_records_the_peak_and_kills_nothing(tmp_path: Path) -> None:
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watchdog = Watchdog(JobDir(tmp_path), node=0, ranks=lambda: {0: rank.pid}, max_fraction=None, lead_s=0.2)
    watchdog.start()
    time.sleep(0.2)
    record = watchdog.finish()
    try:
        assert rank.poll() is None and record.killed == [] and record.trip is None and record.limit is None
        assert record.polls >= 5 and 0 < record.node_peak <= kernel.node_total_bytes()
        assert not (tmp_path / "stop_reason.json").exists()
    finally:
        rank.kill()


def test_the_emulated_cap_counts_the_ranks_own_memory_when_the_node_figure_falls_behind(tmp_path: Path) -> None:
    """The cap trips on the larger of the node figure's rise and the ranks' Σ Pss_Anon, which the watcher hands the
    watchdog at each sample: a neighbour freeing memory must not let a job past its emulated host."""
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watchdog = Watchdog(JobDir(tmp_path), node=0, ranks=lambda: {0: rank.pid}, max_fraction=None, lead_s=0.2, cap_bytes=4 * GIB)
    watchdog.start()
    try:
        time.sleep(0.1)
        assert rank.poll() is None  # the node figure has not risen 4 GiB
        watchdog.ranks_private = 5 * GIB  # what the watcher's sample of the ranks says they hold
        assert rank.wait(timeout=10) == -9
    finally:
        rank.kill()
    record = watchdog.finish()
    assert record.killed == [0] and record.ranks_private_at_trip == 5 * GIB
    reason = json.loads((tmp_path / "stop_reason.json").read_text())["reason"]
    assert reason.startswith("emulated host: the job's ranks held 5.00 GiB (Σ Pss_Anon;") and "past the cap 4.00 GiB" in reason
