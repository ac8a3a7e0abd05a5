"""The shapes of the lines a job's processes append to its directory (jobdir.py names the files): the ranks' stage
events and the watcher's samples. Written and read only through these classes; a line on disk is the flat JSON of
`to_json`, so files of earlier runs read the same.

Light on imports (stdlib only): the watcher and every rank import it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

EventKind = Literal["start", "begin", "end", "error", "done"]
STAGE_CLOSE: tuple[EventKind, ...] = ("end", "error")  # the events that close a stage on a rank


@dataclass(frozen=True)
class RankMemoryNow:
    """A rank's memory at one event, in bytes: the kernel's figures, and torch.cuda's and NVML's where a GPU is used."""

    vmhwm: int = 0  # VmHWM: the peak RSS since the stage's reset
    rss: int = 0
    pss_anon: int = 0
    uss: int = 0
    rss_file: int = 0
    rss_shmem: int = 0  # RssShmem: shared memory in the RSS (not Pss_Anon, yet in the node's used memory)
    rchar: int = 0  # bytes read by read() syscalls so far
    heap_free: int | None = None  # glibc's arenas: freed bytes the allocator keeps for reuse (counted in Pss_Anon)
    cuda_allocated: int | None = None
    cuda_reserved: int | None = None
    cuda_peak_allocated: int | None = None
    cuda_peak_reserved: int | None = None
    cuda_pinned: int | None = None  # torch's pinned host pool: in the RSS but not in Pss_Anon
    cuda_peak_pinned: int | None = None
    cuda_pinned_blocks: int | None = None  # the pool's blocks (power-of-2 sizes): bytes / blocks tells their size
    nvml_used: int | None = None


MEMORY_KEYS = tuple(f.name for f in fields(RankMemoryNow))


@dataclass(frozen=True)
class Event:
    """One line of events/rank<N>.jsonl. `start` (pid, host) first, then per stage `begin` and `end` (or `error`),
    and `done` after the last stage."""

    rank: int
    pid: int
    t: float  # time.time()
    event: EventKind
    stage: str | None = None
    memory: RankMemoryNow | None = None  # begin, end, error
    duration_s: float | None = None  # end
    facts: dict[str, Any] = field(default_factory=dict)  # what a stage reports about itself (end), or an error's
    host: str | None = None  # start: the host, for the watcher to find this node's ranks
    local_rank: int | None = None  # start
    error: str | None = None  # error: "Type: message"
    timeout: bool = False  # error: a collective timed out (the rank waited; another one hung)
    waiting: bool = False  # error: raised in the stage's opening barrier
    traceback: str | None = None  # error

    @property
    def closes_stage(self) -> bool:
        return self.event in STAGE_CLOSE

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "pid": self.pid, "t": self.t, "event": self.event}
        for name in ("stage", "duration_s", "host", "local_rank", "error", "traceback"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.event == "error":
            out.update(timeout=self.timeout, waiting=self.waiting)
        out.update(self.facts)
        if self.memory is not None:
            out.update({k: v for k, v in asdict(self.memory).items() if v is not None})
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        memory = {k: data[k] for k in MEMORY_KEYS if k in data}
        return cls(
            **{k: data[k] for k in EVENT_KEYS if k in data},
            memory=RankMemoryNow(**memory) if memory else None,
            facts={k: v for k, v in data.items() if k not in EVENT_KEYS and k not in MEMORY_KEYS},
        )


EVENT_KEYS = frozenset(f.name for f in fields(Event)) - {"memory", "facts"}  # an event line's own keys
Events = dict[int, list[Event]]  # every rank's events, by rank (JobDir.read_events)


@dataclass(frozen=True)
class RankSample:
    """One rank's figures in a watcher sample (bytes). VmRSS and RssFile are read with the sample; Pss_Anon, a walk of
    the rank's page tables, on its own thread (memory/watcher.py: PrivateMemoryReader), so it carries its own time."""

    pid: int
    rss: int
    rss_file: int
    pss_anon: int
    pss_anon_t: float | None = None  # time.time() of the Pss_Anon read; None: read with the sample (earlier runs)

    def pss_anon_time(self, sample_t: float) -> float:
        return sample_t if self.pss_anon_t is None else self.pss_anon_t


@dataclass(frozen=True)
class Sample:
    """One line of samples.jsonl: the node's used memory (kernel.node_used_bytes) and the free pages on its per-CPU
    lists, which that figure counts as used (kernel.percpu_free_bytes), the job's cgroup where it has one, this
    node's ranks and NVML's used memory per GPU, at time t; about once a second (and in the first and last sample)
    the node's whole /proc/meminfo and its per-CPU free lists too, in bytes (kernel.meminfo_snapshot)."""

    t: float
    node_used: int
    ranks: dict[int, RankSample] = field(default_factory=dict)
    cgroup_usage: int | None = None
    gpu_used: tuple[int, ...] = ()
    meminfo: dict[str, int] | None = None
    percpu_free: int | None = None  # None: samples of earlier runs

    @property
    def node_used_net(self) -> int | None:
        """The node's used memory less the per-CPU lists' free pages (None where the sample has no such reading)."""
        return None if self.percpu_free is None else self.node_used - self.percpu_free

    @property
    def ranks_pss_anon(self) -> int:
        """The ranks' private memory together (Σ Pss_Anon): what the job's own processes hold."""
        return sum(r.pss_anon for r in self.ranks.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": self.t, "node_used": self.node_used}
        if self.cgroup_usage is not None:
            out["cgroup_usage"] = self.cgroup_usage
        out["ranks"] = {str(r): asdict(figures) for r, figures in self.ranks.items()}
        if self.gpu_used:
            out["gpu_used"] = list(self.gpu_used)
        if self.meminfo is not None:
            out["meminfo"] = self.meminfo
        if self.percpu_free is not None:
            out["percpu_free"] = self.percpu_free
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Sample:
        return cls(
            t=data["t"],
            node_used=data["node_used"],
            ranks={int(r): RankSample(**figures) for r, figures in data.get("ranks", {}).items()},
            cgroup_usage=data.get("cgroup_usage"),
            gpu_used=tuple(data.get("gpu_used", ())),
            meminfo=data.get("meminfo"),
            percpu_free=data.get("percpu_free"),
        )


@dataclass(frozen=True)
class SamplesHeader:
    """The first line of samples.jsonl: how the watcher samples."""

    cgroup: str
    interval_s: float

    def to_json(self) -> dict[str, Any]:
        return {"header": True, "cgroup": self.cgroup, "interval_s": self.interval_s}


def json_line(record: Event | Sample | SamplesHeader) -> str:
    return json.dumps(record.to_json()) + "\n"


def is_header(data: dict[str, Any]) -> bool:
    return "header" in data
