"""What would fit when a plan does not: the same job with ZeRO-3 (and, at several ranks, DeepSpeed's memory-efficient
linear, which keeps no gathered weight for the backward), with offload, or spread over more nodes.

Each alternative is planned with the same formulas on the same machine; the first loader (auto's order) that
fits it is named, with the overrides that select it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlhf_exp.config.schema import RoleZero, RunSettings
from rlhf_exp.plan.fit import all_plans, first_misfit
from rlhf_exp.plan.machine import Target, declared_target
from rlhf_exp.plan.terms import RankBase, RoleShape


@dataclass(frozen=True)
class Alternative:
    overrides: str  # what to add to the command line
    loader: str | None  # the first loader that fits it (None: none does)
    node_peak_gib: float
    gpu_need_gib: float


def _zero(settings: RunSettings, stage: int, offload: bool) -> RunSettings:
    role = RoleZero(stage=stage, offload=offload)
    zero = settings.zero.model_copy(update={r: role for r in ("actor", "critic", "ref", "reward")})
    return settings.model_copy(update={"zero": zero})


def _lean_linear(settings: RunSettings) -> RunSettings:
    return settings.model_copy(update={"train": settings.train.model_copy(update={"memory_efficient_linear": True})})


def _candidates(settings: RunSettings, target: Target) -> list[tuple[str, RunSettings, Target]]:
    out = []
    already = settings.all_roles_stage3()
    stage3 = settings if already else _zero(settings, 3, False)
    if not already:
        out.append(("zero=stage3", stage3, target))
    if settings.gpus > 1 and not settings.train.memory_efficient_linear:  # ZeRO-3's training step at N > 1
        lean = "train.memory_efficient_linear=true"
        out.append((lean if already else f"zero=stage3 {lean}", _lean_linear(stage3), target))
    out.append(("zero=stage3_offload", _zero(settings, 3, True), target))
    if not target.read_here and target.ranks_per_node > 1:  # the same ranks over twice the nodes: half the host each
        nodes = settings.gpus // (target.ranks_per_node // 2)
        wider = settings.model_copy(update={"machine": settings.machine.model_copy(update={"nodes": nodes})})
        out.append((f"machine.nodes={nodes}", wider, declared_target(wider, target.device)))
    return out


def alternatives(settings: RunSettings, shapes: dict[str, RoleShape], target: Target, base: RankBase) -> list[Alternative]:
    """Each alternative's first fitting loader (in auto's order), or its least hungry plan when none fits."""
    out = []
    for overrides, alt, alt_target in _candidates(settings, target):
        plans = all_plans(alt, shapes, alt_target, base)
        fitting = [name for name, plan in plans.items() if first_misfit(plan, alt_target) is None]
        name = fitting[0] if fitting else min(plans, key=lambda n: plans[n].node_peak_gib())
        plan = plans[name]
        gpu = max(st.gpu_need_gib for st in plan.stages)
        out.append(Alternative(f"{overrides} loader={name}", name if fitting else None, plan.node_peak_gib(), gpu))
    return out
