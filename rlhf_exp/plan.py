"""The memory planner: per-stage memory predicted from shapes, dtypes, ZeRO, LoRA, loader and rank count.

All formulas live here. Per role: P parameters (model + LoRA + value head), T trainable, C checkpoint
bytes, e engine-dtype bytes, c checkpoint-dtype bytes, N ranks, Z the role's ZeRO stage, g the
staggered group size. "place" is where a rank's weights end up: the host on CPU, the GPU on CUDA.

load (transient above what the rank held before; what it holds after)
  naive            4P + 2C private (fp32 model, the bytes read, the tensors parsed); holds 4P on the host
  staggered        as naive, but holds eP on its place after its turn; node: g ranks at once
  low_mem          eP private and C mapped (read, so in RSS) when the dtypes differ (a converted copy);
                   nothing when they match (the weights are the mapping, untouched until a forward pass)
  direct           low_mem on CPU; on CUDA: C mapped on the host, eP on the GPU
  rank0_broadcast  local rank 0 as low_mem; every other rank eP private on its place
  zero3_init       C mapped and eP/N private (its partition) on its place, plus the largest tensor being gathered
init (deepspeed.initialize)
  broadcast        with N > 1, weights still an unread mapping are read by rank 0 (C into its RSS) and written by the
                   others (C private each, copy-on-write)
  weights          fp32 host models are cast to e (transient: the largest tensor); on CUDA they move to the GPU;
                   under ZeRO-3 a rank keeps eP/N
  optimizer        4T bytes held (the fp32 master copy; DeepSpeed flattens it through a second 4T transient),
                   divided by N for ZeRO >= 1. Adam's m and v and the fp32 gradients (12T more) appear at the first
                   step, not at init (measured on the H200: bench/results/h200-1gpu-plan). ZeRO-3 train roles on
                   a GPU also hold DeepSpeed's gradient bucket: reduce_bucket_size (5e8) x e bytes
PPO stages are not planned (activation memory depends on generation lengths and kernels).

A rank's planned peak in a stage = base (the RSS of a process that imported the rank's libraries,
measured once: plan_inputs.base_rank_bytes) + what it holds from earlier stages + the stage's transient.
The node's = N x base RSS (a rank's libraries, its shared-memory comm buffers and kernel overhead count
node-wide too) + the sum over ranks of private held + transient (file pages excluded: the kernel counts
page cache as available).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rlhf_exp.settings import TRAIN_ROLES, RunSettings, role_stage
from rlhf_exp.stages import DIST_INIT, engine_stage

GIB = 1024**3
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
MASTER_BYTES_PER_TRAINABLE = 4  # fp32 master weights, created by deepspeed.initialize
ZERO3_REDUCE_BUCKET = 500_000_000  # DeepSpeed's default reduce_bucket_size (DeepSpeed-Chat leaves it), in elements


@dataclass
class RoleShape:
    """What the planner knows of one role's model, without loading a weight."""

    params: int  # P, LoRA and value head included
    trainable: int  # T
    checkpoint_bytes: int  # C
    largest_tensor: int  # params of the largest weight (the cast transient)


@dataclass
class RankMemory:
    """Bytes one rank holds, split by kind."""

    host_private: float = 0.0
    host_mapped: float = 0.0  # file pages mapped and read: in the rank's RSS, not in the node's used memory
    gpu: float = 0.0
    lazy: float = 0.0  # weights that are a file mapping nobody has read yet: no RSS until touched

    def plus(self, other: RankMemory) -> RankMemory:
        return RankMemory(
            self.host_private + other.host_private,
            self.host_mapped + other.host_mapped,
            self.gpu + other.gpu,
            self.lazy + other.lazy,
        )


@dataclass
class StagePlan:
    stage: str
    rank_peak_gib: float  # the largest rank's peak RSS (VmHWM) in the stage, base included
    rank_rise_gib: float  # the same above the rank's RSS after dist_init
    node_peak_gib: float  # node-wide peak above the level before ranks started
    gpu_rank_gib: float  # a rank's peak GPU memory (0 on CPU)


@dataclass
class Plan:
    loader: str
    ranks: int
    device: str
    base_rank_gib: float
    stages: list[StagePlan] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gib(n: float) -> float:
    return round(n / GIB, 4)


def load_cost(
    loader: str, shape: RoleShape, e: int, convert: bool, n: int, on_gpu: bool, local_rank: int
) -> tuple[RankMemory, RankMemory]:
    """(transient, held after) of one rank loading one role; `convert`: checkpoint dtype != engine dtype."""
    p, ckpt = shape.params, shape.checkpoint_bytes
    converted = e * p if convert else 0.0
    place = RankMemory(gpu=e * p) if on_gpu else RankMemory(host_private=e * p)
    if loader in ("naive", "staggered"):
        transient = RankMemory(host_private=4 * p + 2 * ckpt)
        return transient, (RankMemory(host_private=4 * p) if loader == "naive" else place)
    if loader == "low_mem" or (loader == "direct" and not on_gpu) or (loader == "rank0_broadcast" and local_rank == 0):
        # mapped pages count in RSS once touched: a dtype conversion reads them all; otherwise the weights
        # are the (untouched, lazily read) mapping itself until a forward pass
        read = RankMemory(host_private=converted, host_mapped=ckpt if convert else 0.0)
        return read, RankMemory(host_private=converted, lazy=0.0 if convert else ckpt)
    if loader == "direct":
        return RankMemory(host_mapped=ckpt, gpu=e * p), RankMemory(gpu=e * p)
    if loader == "rank0_broadcast":
        return place, place
    if loader == "zero3_init":  # a rank gathers one tensor at a time while its partition fills
        part = RankMemory(gpu=e * p / n) if on_gpu else RankMemory(host_private=e * p / n)
        gathered = RankMemory(gpu=e * shape.largest_tensor) if on_gpu else RankMemory(host_private=e * shape.largest_tensor)
        return part.plus(gathered).plus(RankMemory(host_mapped=ckpt)), part
    raise ValueError(f"loader {loader!r} has no plan")


def init_cost(
    loader: str, held: RankMemory, shape: RoleShape, e: int, n: int, zero: int, train: bool, on_gpu: bool, local_rank: int
) -> tuple[RankMemory, RankMemory]:
    """(transient, held after) of deepspeed.initialize given what the load left (`held`).

    deepspeed.initialize broadcasts every weight from rank 0 when N > 1: rank 0 reads its lazily mapped
    weights (file pages into its RSS), every other rank writes into its private mapping (copy-on-write:
    private memory)."""
    p = shape.params
    optimizer = MASTER_BYTES_PER_TRAINABLE * shape.trainable / (n if zero >= 1 else 1) if train else 0.0
    # ZeRO-3 allocates its gradient bucket at init; torch.empty: device memory on a GPU, untouched (no RSS) on a host
    bucket = e * ZERO3_REDUCE_BUCKET if train and zero == 3 and on_gpu else 0.0
    weights = e * p / n if zero == 3 and loader != "zero3_init" else None
    if on_gpu:  # the loaded weights move to the GPU; the host copy is freed afterwards
        gpu = weights if weights is not None else (held.gpu or e * p)
        after = RankMemory(gpu=gpu + optimizer + bucket)
        moving = RankMemory(
            held.host_private + e * shape.largest_tensor, held.host_mapped + held.lazy, max(held.gpu, after.gpu + optimizer)
        )
        return moving, after
    touched = held.lazy if n > 1 else 0.0
    held = RankMemory(
        held.host_private + (touched if local_rank else 0.0),
        held.host_mapped + (0.0 if local_rank else touched),
        held.gpu,
        held.lazy - touched,
    )
    if weights is not None:
        after = RankMemory(host_private=weights + optimizer)
    elif loader == "naive":  # the fp32 model is cast tensor by tensor
        after = RankMemory(host_private=e * p + optimizer)
    else:
        after = RankMemory(host_private=held.host_private + optimizer, host_mapped=held.host_mapped, lazy=held.lazy)
    transient = RankMemory(max(held.host_private, after.host_private + optimizer) + e * shape.largest_tensor, held.host_mapped)
    return transient, after


def make_plan(settings: RunSettings, loader: str, shapes: dict[str, RoleShape], device: str, base_rss: float) -> Plan:
    """Every engine stage of a job with `loader`. base_rss: a rank's RSS before any model, in bytes."""
    n, on_gpu = settings.gpus, device == "cuda"
    e, convert = DTYPE_BYTES[settings.dtype], settings.dtype != settings.model.checkpoint_dtype
    g = min(settings.loader.group_size, n)
    plan = Plan(loader=loader, ranks=n, device=device, base_rank_gib=_gib(base_rss))
    plan.stages.append(StagePlan(DIST_INIT, _gib(base_rss), 0.0, _gib(n * base_rss), 0.0))
    held = [RankMemory() for _ in range(n)]  # what each rank holds from finished stages
    for role in settings.roles:
        shape, zero = shapes[role], role_stage(getattr(settings.zero, role))
        costs = [load_cost(loader, shape, e, convert, n, on_gpu, r) for r in range(n)]
        _add_stage(plan, engine_stage(role, "load"), held, costs, base_rss, loader == "staggered", g)
        load_held = [after for _, after in costs]
        costs = [init_cost(loader, load_held[r], shape, e, n, zero, role in TRAIN_ROLES, on_gpu, r) for r in range(n)]
        _add_stage(plan, engine_stage(role, "init"), held, costs, base_rss, False, g)  # init's transient counts the loaded model
        held = [held[r].plus(costs[r][1]) for r in range(n)]
    return plan


def _add_stage(
    plan: Plan,
    name: str,
    held: list[RankMemory],
    costs: list[tuple[RankMemory, RankMemory]],
    base_rss: float,
    staggered: bool,
    group: int,
) -> None:
    """One stage's figures from what ranks held before it and each rank's (transient, held after)."""
    n = len(held)
    peaks = [held[r].plus(costs[r][0]) for r in range(n)]
    rank_rise = max(p.host_private + p.host_mapped for p in peaks)
    before_private = [held[r].host_private for r in range(n)]
    transient_private = [costs[r][0].host_private for r in range(n)]
    if staggered:  # one group loads at a time; the groups before it hold what they keep
        done = [costs[r][1].host_private for r in range(n)]
        node = max(
            sum(before_private) + sum(transient_private[t * group : (t + 1) * group]) + sum(done[: t * group])
            for t in range((n + group - 1) // group)
        )
    else:
        node = sum(before_private) + sum(transient_private)
    plan.stages.append(
        StagePlan(
            name,
            rank_peak_gib=_gib(base_rss + rank_rise),
            rank_rise_gib=_gib(rank_rise),
            node_peak_gib=_gib(n * base_rss + node),
            gpu_rank_gib=_gib(max(p.gpu for p in peaks)),
        )
    )
