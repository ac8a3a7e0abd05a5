"""The measured record of one stage, declared once: every field with its label and unit.

report/summary.py builds these from rank events and watcher samples; result.json stores them as plain
dicts under `stages`; the console table, the W&B summary, the HTML report and the plan comparison all
read their columns from the field metadata here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


def measured(label: str, unit: str, *, table: str = "", summary: bool = False) -> Any:
    """A field of the record: `label`/`unit` for people; `table`: a console column, with what it means for the table's
    legend; `summary`: a W&B summary key."""
    return field(default=None, metadata={"label": label, "unit": unit, "table": table, "summary": summary})


@dataclass
class RankRecord:
    """One rank's figures in one stage (kernel and framework readings, GiB)."""

    rank: int
    pid: int
    duration_s: float | None = measured("time", "s")
    peak_rss_gib: float | None = measured("VmHWM", "GiB")  # kernel high-water mark (sampled RSS max for a rank that died)
    rss_begin_gib: float | None = measured("RSS at begin", "GiB")
    pss_anon_end_gib: float | None = measured("Pss_Anon at end", "GiB")
    pss_anon_peak_gib: float | None = measured("Pss_Anon peak", "GiB")
    uss_end_gib: float | None = measured("USS at end", "GiB")
    rss_file_rise_gib: float | None = measured("file pages mapped", "GiB")  # a memory-mapped checkpoint: who touched it
    rss_file_peak_gib: float | None = measured("RssFile peak", "GiB")  # libraries' pages and the checkpoint's mapped
    rss_shmem_end_gib: float | None = measured("RssShmem at end", "GiB")  # shared memory: /dev/shm, NCCL's shm transport
    read_gib: float | None = measured("read()", "GiB")  # bytes read by read() syscalls: a private copy
    heap_free_end_gib: float | None = measured("heap kept at end", "GiB")  # freed, held by glibc's arenas (in Pss_Anon)
    cuda_allocated_gib: float | None = measured("CUDA allocated", "GiB")
    cuda_reserved_gib: float | None = measured("CUDA reserved", "GiB")
    cuda_peak_allocated_gib: float | None = measured("CUDA peak allocated", "GiB")
    cuda_peak_reserved_gib: float | None = measured("CUDA peak reserved", "GiB")
    cuda_pinned_gib: float | None = measured("pinned host pool", "GiB")  # torch's page-locked host blocks, cached too
    cuda_peak_pinned_gib: float | None = measured("pinned host pool peak", "GiB")
    cuda_pinned_blocks: int | None = measured("pinned host blocks", "")  # blocks in the pool (cudaHostAlloc less frees)
    nvml_used_gib: float | None = measured("NVML used", "GiB")


@dataclass
class StageRecord:
    """One stage of a job across its ranks. Node and cgroup figures are above the baseline before ranks started."""

    stage: str
    status: str  # ok | failed | incomplete
    ranks_begun: int
    ranks_done: int
    duration_s: float | None = measured("time", "s", table="the stage's time on its slowest rank", summary=True)
    window_s: float | None = measured("window", "s")  # first rank's begin to last rank's end
    samples: int | None = measured("samples", "")
    node_peak_gib: float | None = measured(
        "node Δ",
        "GiB",
        table="the node's used memory (MemTotal - MemAvailable - Balloon) at its peak, above the level before ranks started",
        summary=True,
    )
    # the same peak with the per-CPU lists' free pages left out of the node's used memory (at the baseline too): what
    # their filling and draining moved node Δ by (bench/results/first-run-2026-12-07); the plan is checked on node Δ
    node_net_peak_gib: float | None = measured("node Δ net of per-CPU free lists", "GiB")
    node_rise_gib: float | None = measured(
        "stage rise", "GiB", table="the same peak above the level when the stage began", summary=True
    )  # peak minus the level at begin
    cgroup_peak_gib: float | None = measured(
        "cgroup Δ", "GiB", table="the job's memory cgroup at its peak, above the level before ranks started", summary=True
    )
    rank_peak_rss_max_gib: float | None = measured(
        "rank VmHWM max", "GiB", table="the largest rank's peak RSS (the kernel's VmHWM, reset at each stage)", summary=True
    )
    rank_pss_anon_peak_max_gib: float | None = measured(
        "rank Pss_Anon max",
        "GiB",
        table="the largest rank's private memory (Pss_Anon: shared pages split among sharers)",
        summary=True,
    )
    pss_anon_sum_peak_gib: float | None = measured(
        "Σ Pss_Anon", "GiB", table="the ranks' Pss_Anon summed, at its peak", summary=True
    )
    rank_uss_end_max_gib: float | None = measured("rank USS", "GiB", table="the largest rank's unique memory at the stage's end")
    rank_rss_file_peak_max_gib: float | None = measured("rank RssFile max", "GiB")
    rank_heap_free_end_max_gib: float | None = measured("rank heap kept", "GiB")  # glibc's freed-but-kept, largest rank
    gpu_cuda_peak_allocated_gib: float | None = measured(
        "GPU peak alloc", "GiB", table="torch's peak allocated GPU memory on the largest rank", summary=True
    )
    gpu_cuda_reserved_gib: float | None = measured(
        "GPU reserved", "GiB", table="torch's caching allocator reserve on the largest rank", summary=True
    )
    gpu_nvml_used_gib: float | None = measured(
        "NVML used", "GiB", table="the GPU's used memory as the driver (NVML) reports it, every process on it", summary=True
    )
    gpu_nvml_peak_gib: float | None = measured("NVML peak (watcher)", "GiB")
    # what else moved on the node: /proc/meminfo fields (and the per-CPU free lists, PerCpuFreeLists) that changed by
    # MEMINFO_MOVED_GIB or more from the baseline to the stage's end (the watcher's last snapshot by then), e.g. page
    # cache, slab, memory outside the job freed, or free pages draining from the per-CPU lists
    meminfo_moved_gib: dict[str, float] | None = measured("/proc/meminfo moved", "GiB")
    # what a stage reports about itself (rank 0's figures)
    params: int | None = measured("parameters", "")
    trainable_params: int | None = measured("trainable parameters", "")
    zero_stage: int | None = measured("ZeRO stage", "")
    copied_from: str | None = measured("weights copied from", "")  # a load that copied an earlier role's (loaders/twin.py)
    optimizer_state_gib: float | None = measured("optimizer states", "GiB")  # the role's Adam states (torch's tensors)
    gpu_allocator_cap_gib: float | None = measured("GPU allocator cap", "GiB")  # machine.emulate (memory/emulation.py)
    cuda_context_gib: float | None = measured("CUDA context", "GiB")  # dist_init: NVML for this process less torch
    tokens: int | None = measured("tokens", "")
    actor_loss: float | None = measured("actor loss", "")
    critic_loss: float | None = measured("critic loss", "")
    reward_mean: float | None = measured("reward mean", "")
    kl: float | None = measured("KL", "")
    per_rank: list[dict[str, Any]] = field(default_factory=list)  # RankRecord dicts, by rank

    def to_dict(self) -> dict[str, Any]:
        """The row as result.json stores it: absent figures left out (a CPU run has no GPU columns)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None or f.name in ALWAYS_STORED:
                out[f.name] = value
        return out


MEMINFO_MOVED_GIB = 0.05

# figures a CPU run stores as null rather than leaving out (readers index them directly)
ALWAYS_STORED = {
    "duration_s",
    "node_peak_gib",
    "node_rise_gib",
    "cgroup_peak_gib",
    "rank_peak_rss_max_gib",
    "rank_pss_anon_peak_max_gib",
    "pss_anon_sum_peak_gib",
    "rank_uss_end_max_gib",
}
STAGE_FACTS = (
    "params",
    "trainable_params",
    "zero_stage",
    "copied_from",
    "optimizer_state_gib",
    "gpu_allocator_cap_gib",
    "cuda_context_gib",
    "tokens",
    "actor_loss",
    "critic_loss",
    "reward_mean",
    "kl",
)
RANK_GPU_FIGURES = (
    "cuda_allocated",
    "cuda_reserved",
    "cuda_peak_allocated",
    "cuda_peak_reserved",
    "cuda_pinned",
    "cuda_peak_pinned",
    "nvml_used",
)


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    unit: str
    meaning: str = ""  # a console column's line in the table's legend

    @property
    def header(self) -> str:
        return f"{self.label} {self.unit}".strip()


def stage_columns(*, table: bool = False, summary: bool = False) -> list[Column]:
    """The measured stage fields a consumer shows: console table columns, or W&B summary keys."""
    return [
        Column(f.name, f.metadata["label"], f.metadata["unit"], f.metadata["table"])
        for f in fields(StageRecord)
        if f.metadata and ((table and f.metadata["table"]) or (summary and f.metadata["summary"]))
    ]


COLUMN = {f.name: Column(f.name, f.metadata["label"], f.metadata["unit"]) for f in fields(StageRecord) if f.metadata}


def summary_key(stage: str, key: str) -> str:
    """The W&B summary key of one stage figure."""
    return f"mem/{stage}/{key}"
