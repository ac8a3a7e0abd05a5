"""The watcher: a separate process sampling node and per-rank memory into the job dir's samples file.

`python -m rlhf_exp.memory.watcher <job_dir> --parent PID --interval 0.02 --ranks N --node K`. Runs until the
job asks it to stop (rlhf_exp/jobdir.py) or the parent (the job) dies. A sampler thread inside a busy rank
misses load peaks, so this process only samples. Each line is one records.Sample, flushed as taken.
Ranks are found from the `start` event each rank writes (pid, host) in events/. Its watchdog thread
(memory/watchdog.py) polls the node figure faster, and stops the ranks before the kernel's OOM killer would.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import threading
import time
from pathlib import Path

import psutil

from rlhf_exp.config.units import GIB
from rlhf_exp.jobdir import JobDir
from rlhf_exp.memory import kernel
from rlhf_exp.memory.gpu import Nvml
from rlhf_exp.memory.watchdog import Watchdog
from rlhf_exp.records import Event, RankSample, Sample, SamplesHeader, json_line


class RankFinder:
    """Finds this host's ranks from the `start` event each rank writes first (pid and host).

    Works whether ranks are the launcher's children or SLURM tasks. Rescans only while ranks are
    missing, and otherwise once a second, so the watcher does not steal the ranks' CPU.
    """

    def __init__(self, events_dir: Path, expected: int) -> None:
        self.events_dir = events_dir
        self.expected = expected
        self.host = socket.gethostname()
        self.found: dict[int, int] = {}
        self.scanned_at = 0.0

    def ranks(self) -> dict[int, int]:
        now = time.monotonic()
        if len(self.found) < self.expected or now - self.scanned_at > 1.0:
            self.found = self._scan()
            self.scanned_at = now
        return self.found

    def _scan(self) -> dict[int, int]:
        found: dict[int, int] = {}
        for path in self.events_dir.glob("rank*.jsonl"):
            try:
                with open(path) as fh:
                    first = Event.from_json(json.loads(fh.readline()))
            except (OSError, json.JSONDecodeError):
                continue  # being written: next scan
            if first.event == "start" and first.host == self.host and psutil.pid_exists(first.pid):
                found[first.rank] = first.pid
        return found


MEMINFO_EVERY_S = 1.0  # a meminfo_snapshot in the samples this often: ~50 fields, too many for every 20 ms line


class PrivateMemoryReader:
    """Each rank's Pss_Anon, read from smaps_rollup on a thread of its own, round after round.

    smaps_rollup walks the process's page tables: ~10 ms of CPU per GiB of its RSS (~80 ms for a rank of a GPU-scale
    job). Read inline, 8 such ranks held the samples to 5-10 a second, not the 20 configured, and a stage shorter than
    that got one sample. The kernel walks inside read(), with the GIL released, so the sampler keeps its period
    while this thread walks; each value keeps the time it was read, by which the stages are told apart.
    """

    def __init__(self, finder: RankFinder, interval: float) -> None:
        self.finder, self.interval = finder, interval
        self.latest: dict[int, tuple[int, int, float]] = {}  # rank: (pid, Pss_Anon, time.time() of the read)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-anon-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)  # a walk waits on the rank's mmap lock; the watchdog's record must not wait on it

    def read(self, rank: int, pid: int) -> tuple[int, float]:
        """Read one rank's Pss_Anon now, timed at the walk's midpoint (a GiB-scale walk takes tens of ms); kept unless
        the process is gone (then it reads 0)."""
        before = time.time()
        smaps = kernel.process_smaps(pid)
        pss_anon, at = smaps.get("Pss_Anon", 0), (before + time.time()) / 2
        if smaps:
            self.latest[rank] = (pid, pss_anon, at)
        return pss_anon, at

    def value(self, rank: int, pid: int) -> tuple[int, float]:
        """The rank's latest reading; read now where there is none of this process yet (a rank just found)."""
        known = self.latest.get(rank)
        return (known[1], known[2]) if known and known[0] == pid else self.read(rank, pid)

    def _run(self) -> None:
        while not self._stop.is_set():
            for rank, pid in list(self.finder.found.items()):
                self.read(rank, pid)
            self._stop.wait(self.interval)


def take_sample(
    finder: RankFinder, cgroup: kernel.CgroupMemory, nvml: Nvml, private: PrivateMemoryReader, with_meminfo: bool = False
) -> Sample:
    meminfo = kernel.meminfo_snapshot() if with_meminfo else None  # one read gives the node figure and its snapshot
    t, node_used = time.time(), kernel.node_used_of(meminfo) if meminfo else kernel.node_used_bytes()
    percpu_free = meminfo[kernel.PERCPU_FREE_LISTS] if meminfo else kernel.percpu_free_bytes()  # ~0.2 ms a read here
    ranks: dict[int, RankSample] = {}
    for rank, pid in finder.ranks().items():
        status = kernel.process_status(pid)
        if status:
            pss_anon, read_at = private.value(rank, pid)
            ranks[rank] = RankSample(pid, status.get("VmRSS", 0), status.get("RssFile", 0), pss_anon, read_at)
    gpu_used = tuple(nvml.all_used_bytes()) if nvml.handles else ()
    return Sample(t, node_used, ranks, cgroup.usage_bytes(), gpu_used, meminfo, percpu_free)


def watch(
    job_dir: JobDir,
    parent: int,
    interval: float,
    ranks: int,
    node: int = 0,
    max_fraction: float | None = None,
    lead_s: float = 0.2,
    cap_gib: float | None = None,
) -> None:
    finder, cgroup, nvml = RankFinder(job_dir.events_dir, ranks), kernel.CgroupMemory(), Nvml()
    private = PrivateMemoryReader(finder, interval)
    cap = int(cap_gib * GIB) if cap_gib is not None else None
    watchdog = Watchdog(job_dir, node, lambda: finder.found, max_fraction, lead_s, cap_bytes=cap)
    watchdog.start()
    private.start()
    try:
        with open(job_dir.samples_file(node), "a", buffering=1) as out:
            out.write(json_line(SamplesHeader(cgroup.describe(), interval)))
            meminfo_at = float("-inf")  # the first sample (the baseline) carries one
            next_at = time.monotonic()
            while not job_dir.watcher_stop_requested() and psutil.pid_exists(parent):
                with_meminfo = time.monotonic() - meminfo_at >= MEMINFO_EVERY_S
                sample = take_sample(finder, cgroup, nvml, private, with_meminfo)
                meminfo_at = time.monotonic() if with_meminfo else meminfo_at
                watchdog.ranks_private = sample.ranks_pss_anon  # the emulated cap's second figure
                out.write(json_line(sample))
                next_at = max(next_at + interval, time.monotonic())  # a period, not a pause: late samples skip ahead
                time.sleep(max(0.0, next_at - time.monotonic()))
            out.write(json_line(take_sample(finder, cgroup, nvml, private, with_meminfo=True)))
    finally:
        private.stop()
        job_dir.write_watchdog(node, watchdog.finish().to_json())


def ignore_interrupt() -> None:
    """Ctrl-C and SIGTERM (SLURM signals every process of a step) are for the job, which records the interruption
    (job/interrupt.py); the watcher stops when the job tells it to, or when the job is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("job_dir", type=Path)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--ranks", type=int, default=1, help="ranks expected on this node")
    parser.add_argument("--node", type=int, default=0, help="this node's index (node 0's samples are the job's)")
    parser.add_argument("--max-node-fraction", type=float, default=None, help="watchdog limit (share of MemTotal)")
    parser.add_argument("--lead-s", type=float, default=0.2, help="watchdog projection: the climb of the last lead_s ahead")
    parser.add_argument("--cap-gib", type=float, default=None, help="machine.emulate: the job's host cap above its start")
    args = parser.parse_args()
    job_dir = JobDir(args.job_dir)
    ignore_interrupt()
    try:
        watch(job_dir, args.parent, args.interval, args.ranks, args.node, args.max_node_fraction, args.lead_s, args.cap_gib)
    except OSError as err:  # e.g. the disk is full: leave the reason where the job guard reads it
        job_dir.write_watcher_error(f"{type(err).__name__}: {err}")
        raise SystemExit(1) from err


if __name__ == "__main__":
    main()
