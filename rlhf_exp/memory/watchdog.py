"""The watchdog: stops this node's ranks before the kernel's OOM killer picks one.

A thread of the watcher process (memory/watcher.py). With loads at host-memory speed, eight ranks first-touching
fresh pages lift the node several GiB in 50 ms: more than the watcher's sampling period (which walks every rank's
smaps, slower the bigger the ranks) and the guard's SIGTERM round trip (a rank inside a long C call runs no Python
handler) leave room for on a full host. So the watchdog:
- polls the node figure alone (MemTotal - MemAvailable, one read of /proc/meminfo) every `poll_s`;
- trips on a projection: the node figure plus its climb over the last `lead_s`, i.e. where it will be `lead_s`
  from now at the same pace, at or above the limit (`max_node_fraction` of MemTotal);
- then writes the stop reason for the job's guard first and SIGKILLs this node's ranks itself: a killed process
  allocates nothing more, at once. The guard then stops the job and names the watchdog and the stage.
With `machine.emulate` and no cgroup for the job (memory/emulation.py) it also holds the job to the emulated host
cap: the job's memory at most `cap` above its first poll (the level before the ranks started), checked exactly, as
the target's kernel would, with no projection. The job's memory is the larger of the node figure's rise and its
ranks' private memory (Σ Pss_Anon, from the watcher's latest sample): a neighbour freeing memory lowers the node
figure under a job that still holds its own (seen in CI: node +0.71 GiB while the ranks held 1.90).
Its record (watchdog.json) holds the limit, the trip, the highest node figure its polls saw and the kernel's own
count of OOM kills on the node while it watched (/proc/vmstat oom_kill): proof of who stopped the job.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from rlhf_exp.config.units import GIB
from rlhf_exp.jobdir import JobDir
from rlhf_exp.memory import kernel

POLL_S = 0.01  # ~100 µs a poll: 1 % of a core


@dataclass
class Trip:
    t: float
    node_used: int  # bytes, at the poll that tripped
    climb: int  # bytes the node figure rose over the last lead_s
    projected: int  # node_used + climb


@dataclass
class WatchdogRecord:
    """watchdog.json (watchdog.node<N>.json): what this node's watchdog saw and did. Bytes."""

    node: int
    mem_total: int
    limit: int | None  # None: the watchdog is off (watcher.max_node_fraction=null); its polls still record the peak
    lead_s: float
    poll_s: float
    polls: int = 0
    node_peak: int = 0  # the highest node figure any poll saw
    trip: Trip | None = None
    killed: list[int] = field(default_factory=list)  # ranks this watchdog SIGKILLed
    oom_kills: int | None = None  # the kernel's OOM kills on this node while it watched; None where not reported
    cap: int | None = None  # machine.emulate: the job's host cap above the node figure of the first poll
    cap_limit: int | None = None  # that first figure plus the cap
    ranks_private_at_trip: int | None = None  # the ranks' Σ Pss_Anon when the cap tripped

    def to_json(self) -> dict:
        return asdict(self)


def projected_trip(history: deque[tuple[float, int]], limit: int) -> Trip | None:
    """A Trip when the newest node figure plus its climb over the window `history` holds reaches `limit`."""
    t, used = history[-1]
    climb = max(0, used - min(u for _, u in history))
    return Trip(t=time.time(), node_used=used, climb=climb, projected=used + climb) if used + climb >= limit else None


def cap_reason(trip: Trip, record: WatchdogRecord, killed: list[int]) -> str:
    assert record.cap is not None and record.cap_limit is not None
    rise = trip.node_used - (record.cap_limit - record.cap)
    held = record.ranks_private_at_trip or 0
    if held > rise:
        figure = f"ranks held {held / GIB:.2f} GiB (Σ Pss_Anon; the node figure rose {rise / GIB:.2f})"
    else:
        figure = f"node memory rose {rise / GIB:.2f} GiB above its start"
    return (
        f"emulated host: the job's {figure}, past the cap {record.cap / GIB:.2f} GiB "
        f"(machine.host_gib x plan.host_fraction); ranks {killed or 'none yet'} killed"
    )


def trip_reason(trip: Trip, record: WatchdogRecord, max_fraction: float, killed: list[int]) -> str:
    climbing = f", climbing {trip.climb / GIB:.2f} GiB in the last {record.lead_s:g} s" if trip.climb else ""
    return (
        f"watchdog: node memory {trip.node_used / GIB:.2f} GiB{climbing} (projected {trip.projected / GIB:.2f}) reached "
        f"the limit {record.limit / GIB:.2f} GiB, watcher.max_node_fraction={max_fraction} of MemTotal "
        f"({record.mem_total / GIB:.1f} GiB); ranks {killed or 'none yet'} killed"
    )


class Watchdog(threading.Thread):
    """Polls the node figure; on a projected crossing, leaves the stop reason and SIGKILLs this node's ranks."""

    def __init__(
        self,
        job_dir: JobDir,
        node: int,
        ranks: Callable[[], dict[int, int]],
        max_fraction: float | None,
        lead_s: float,
        poll_s: float = POLL_S,
        cap_bytes: int | None = None,
    ) -> None:
        super().__init__(name="watchdog", daemon=True)
        self.job_dir, self.ranks, self.max_fraction = job_dir, ranks, max_fraction
        total = kernel.node_total_bytes()
        limit = int(max_fraction * total) if max_fraction is not None else None
        self.record = WatchdogRecord(node=node, mem_total=total, limit=limit, lead_s=lead_s, poll_s=poll_s, cap=cap_bytes)
        self.meminfo = kernel.MemInfo()
        self.oom_kills_before = kernel.oom_kill_count()
        self.done = threading.Event()
        self.ranks_private = 0  # the ranks' Σ Pss_Anon at the watcher's latest sample (set by the watcher)

    def run(self) -> None:
        history: deque[tuple[float, int]] = deque()
        record = self.record
        while not self.done.wait(record.poll_s):
            now, used = time.monotonic(), self.meminfo.used_bytes()
            record.polls += 1
            record.node_peak = max(record.node_peak, used)
            history.append((now, used))
            while now - history[0][0] > record.lead_s:
                history.popleft()
            if record.cap is not None and record.cap_limit is None:
                record.cap_limit = used + record.cap  # the first poll: before any rank started
            if record.cap_limit is not None and record.trip is None and self.over_cap(used):
                record.ranks_private_at_trip = self.ranks_private
                self.stop_ranks(Trip(t=time.time(), node_used=used, climb=0, projected=used), capped=True)
            elif record.limit is not None and record.trip is None:
                trip = projected_trip(history, record.limit)
                if trip:
                    self.stop_ranks(trip)
            elif record.trip is not None:
                self.kill_ranks()  # ranks that started after the trip (the guard's stop is on its way)

    def over_cap(self, used: int) -> bool:
        record = self.record
        assert record.cap is not None and record.cap_limit is not None
        return used >= record.cap_limit or self.ranks_private >= record.cap

    def stop_ranks(self, trip: Trip, capped: bool = False) -> None:
        """The reason first (the guard and the failure attribution read it), then the kill."""
        self.record.trip = trip
        alive = sorted(self.ranks())
        if capped:
            reason = cap_reason(trip, self.record, alive)
        else:
            assert self.max_fraction is not None
            reason = trip_reason(trip, self.record, self.max_fraction, alive)
        self.job_dir.write_stop_reason(reason, trip.t)
        self.kill_ranks()

    def kill_ranks(self) -> None:
        for rank, pid in sorted(self.ranks().items()):
            if rank in self.record.killed:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # gone already
                continue
            self.record.killed.append(rank)

    def finish(self) -> WatchdogRecord:
        """Stop polling; the record, with the OOM kills the kernel counted meanwhile."""
        self.done.set()
        if self.is_alive():
            self.join()
        after = kernel.oom_kill_count()
        if self.oom_kills_before is not None and after is not None:
            self.record.oom_kills = after - self.oom_kills_before
        self.meminfo.close()
        return self.record
