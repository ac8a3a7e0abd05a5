"""The planner's vocabulary: what it knows of a role's model, what a rank holds, and the plan it produces."""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class RoleShape:
    """What the planner knows of one role's model, without loading a weight."""

    params: int  # P, LoRA and value head included
    trainable: int  # T
    checkpoint_bytes: int  # C
    largest_tensor: int  # params of the largest weight (the cast transient)
    layers: int = 0  # decoder blocks, and the widths the PPO step's activations scale with
    hidden: int = 0
    intermediate: int = 0  # the MLP's inner width
    vocab: int = 0
    kv_width: int = 0  # key/value heads x head dim (the KV cache's width per layer)
    loaded_params: int = 0  # the checkpoint's model, as loaded (no LoRA, no value head); 0: params
    read_peak_bytes: int = 0  # naive's private read at its peak: the shards parsed so far plus the raw bytes of the
    # one being parsed, max over shards (0: 2C, as if one file)
    largest_file_bytes: int = 0  # the largest weight file (shard); 0: C, as if one file

    @property
    def loaded(self) -> int:
        return self.loaded_params or self.params

    @property
    def read_peak(self) -> int:
        return self.read_peak_bytes or 2 * self.checkpoint_bytes

    @property
    def largest_file(self) -> int:
        return self.largest_file_bytes or self.checkpoint_bytes


@dataclass(frozen=True)
class RankBase:
    """A rank's footprint before any model (imports, CUDA context, comm buffers), as a probe process measures it."""

    rss: float  # VmRSS: what its peak RSS starts from
    private: float  # RssAnon: what it adds to the node's used memory (library code pages are page cache)


@dataclass(frozen=True)
class LoadContext:
    """One rank loading one role: the inputs of a loader's plan cost."""

    shape: RoleShape
    engine_bytes: int  # e: bytes per element of the engine dtype
    convert: bool  # the checkpoint dtype differs from the engine's
    ranks: int  # N
    on_gpu: bool
    local_rank: int
    staging_bytes: float = 0.0  # fast_read's buffers per rank: threads x 2 x chunk (pinned host; the GPU too when converting)
    nccl: bool = False  # one rank per GPU, talking through NCCL (ranks sharing a GPU use gloo)


@dataclass
class RankMemory:
    """Bytes one rank holds, split by kind."""

    host_private: float = 0.0
    host_mapped: float = 0.0  # file pages mapped and read: in the rank's RSS, not in the node's used memory
    gpu: float = 0.0
    lazy: float = 0.0  # weights that are a file mapping nobody has read yet: no RSS until touched
    host_outside: float = 0.0  # node memory the rank causes outside its RSS (the GPU driver's host allocations)

    def node_bytes(self) -> float:
        """What counts in the node's used memory (mapped file pages are page cache)."""
        return self.host_private + self.host_outside

    def plus(self, other: RankMemory) -> RankMemory:
        return RankMemory(
            self.host_private + other.host_private,
            self.host_mapped + other.host_mapped,
            self.gpu + other.gpu,
            self.lazy + other.lazy,
            self.host_outside + other.host_outside,
        )

    def larger(self, other: RankMemory) -> RankMemory:
        """The peak of two moments apart, kind by kind."""
        return RankMemory(*(max(a, b) for a, b in zip(astuple(self), astuple(other), strict=True)))


def compared(measured_key: str, label: str) -> Any:
    """A planned figure that reports show beside the stage record's `measured_key` (plan/compare.py pairs them)."""
    return field(default=0.0, metadata={"measured": measured_key, "label": label})


@dataclass
class StagePlan:
    stage: str
    rank_peak_gib: float  # the largest rank's peak RSS (VmHWM) in the stage, base included
    rank_rise_gib: float  # the same above the rank's RSS after dist_init
    node_peak_gib: float  # node-wide peak above the level before ranks started
    gpu_rank_gib: float  # a rank's peak GPU memory allocated by torch (0 on CPU)
    gpu_device_gib: float = 0.0  # what the device holds for the rank: allocations, allocator reserve, CUDA context
    # what a card must have for the rank (the fit check's GPU figure): torch's allocations and the CUDA context; the
    # allocator's cache above them is given back before an out-of-memory (bench/results/seed-a100-2026-12-05)
    gpu_need_gib: float = 0.0
    # file pages in the largest rank's RSS: its libraries' (the base's shared part) and the checkpoint pages it mapped
    rank_file_gib: float = compared("rank_rss_file_peak_max_gib", "rank RssFile")
    # Adam's states of the stage's role on a rank (its init: DeepSpeed 0.9's timing; its training step)
    optimizer_state_gib: float = compared("optimizer_state_gib", "optimizer states")


# planned figure -> (the stage record's field it is shown against (report/record.py declares those), its label)
COMPARED = {f.name: (f.metadata["measured"], f.metadata["label"]) for f in fields(StagePlan) if "measured" in f.metadata}


def plan_stages(plan: dict[str, Any] | None) -> list[StagePlan]:
    """The stage rows of a stored plan (plan.json, result.json's `plan`), typed; keys a newer plan added are left."""
    names = {f.name for f in fields(StagePlan)}
    return [StagePlan(**{k: v for k, v in st.items() if k in names}) for st in (plan or {}).get("stages", [])]


@dataclass
class Plan:
    loader: str
    ranks: int
    device: str
    base_rank_gib: float
    ranks_per_node: int = 0
    base_private_gib: float = 0.0  # the ranks node figures sum (0 in plans recorded before machines: all of them)
    stages: list[StagePlan] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def node_peak_gib(self) -> float:
        return max(st.node_peak_gib for st in self.stages)
