"""Whether a plan fits this machine, the `loader=auto` choice, and the one-line refusal naming what fits."""

from __future__ import annotations

from typing import NamedTuple

from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.schema import RunSettings
from rlhf_exp.config.units import GIB
from rlhf_exp.loaders.registry import AUTO, auto_order
from rlhf_exp.plan.formulas import GPU_PLAN_ERROR, make_plan
from rlhf_exp.plan.machine import Target
from rlhf_exp.plan.terms import Plan, RankBase, RoleShape, StagePlan

GPU_WITH_ERROR = f"GPU +{GPU_PLAN_ERROR:.0%}"  # the memory a misfit names when only the plan's error makes it one


class Misfit(NamedTuple):
    """The first stage of a plan that does not fit: what the plan record stores (`first_misfit`, as a dict)."""

    stage: str
    memory: str  # "host", "GPU" or GPU_WITH_ERROR
    need_gib: float
    capacity_gib: float

    def describe(self) -> str:
        """The verdict as every report prints it: 'does not fit at ppo1.train_actor (GPU: 79.60 of 79.15 GiB)'."""
        return f"does not fit at {self.stage} ({self.memory}: {self.need_gib:.2f} of {self.capacity_gib:.2f} GiB)"


def verdict_of(first: dict | None) -> str:
    """A plan record's verdict from its stored `first_misfit` (None where it fits)."""
    return Misfit(**first).describe() if first else "fits"


def gpu_fit_need(stage: StagePlan) -> float:
    """What the fit check asks of a card for one rank at this stage (GiB): what it needs, with the planner's error on
    torch's peak (GPU_PLAN_ERROR) added, so that a plan a little under the measurement still refuses in time."""
    return stage.gpu_need_gib + GPU_PLAN_ERROR * stage.gpu_rank_gib


def first_misfit(plan: Plan, cap: Target) -> Misfit | None:
    """The first stage that does not fit (stage, memory, needed GiB, capacity GiB), or None.

    Host: the node's peak against one node's usable memory. GPU: what the card must have (torch's allocations and
    the CUDA context) for every rank on it, against the card's memory. Where every stage fits on the plan's own
    figures but one would not with the planner's error on the GPU, that stage, as memory GPU_WITH_ERROR: the error
    refuses such a job without moving the stage named where the figures themselves do not fit."""
    card = None if cap.gpu_bytes is None else cap.gpu_bytes / GIB
    for st in plan.stages:
        if st.node_peak_gib * GIB > cap.host_bytes:
            return Misfit(st.stage, "host", st.node_peak_gib, cap.host_bytes / GIB)
        if card is not None and st.gpu_need_gib * cap.ranks_per_gpu > card:
            return Misfit(st.stage, "GPU", st.gpu_need_gib * cap.ranks_per_gpu, card)
    for st in plan.stages if card is not None else ():
        if gpu_fit_need(st) * cap.ranks_per_gpu > card:
            return Misfit(st.stage, GPU_WITH_ERROR, gpu_fit_need(st) * cap.ranks_per_gpu, card)
    return None


def usable_loaders(settings: RunSettings) -> list[str]:
    """Loaders this config allows, in auto's order."""
    stage3 = settings.all_roles_stage3()
    return [spec.name for spec in auto_order() if stage3 or not spec.partitioned]


def all_plans(settings: RunSettings, shapes: dict[str, RoleShape], target: Target, base: RankBase) -> dict[str, Plan]:
    return {name: make_plan(settings, name, shapes, target, base) for name in usable_loaders(settings)}


def pick(settings: RunSettings, plans: dict[str, Plan], cap: Target) -> str:
    """The configured loader, or for auto the fastest whose plan fits (the least hungry when none does)."""
    if settings.loader.name != AUTO:
        return settings.loader.name
    fitting = [name for name, plan in plans.items() if first_misfit(plan, cap) is None]
    return fitting[0] if fitting else min(plans, key=lambda n: plans[n].node_peak_gib())


def choose(settings: RunSettings, plans: dict[str, Plan], cap: Target) -> str:
    """The loader to run: `pick`'s, when its plan fits or plan.fit_check is off.

    Raises ConfigError naming the first stage that does not fit and the loaders that would.
    """
    name = pick(settings, plans, cap)
    misfit = first_misfit(plans[name], cap)
    if misfit is None or (not settings.plan.fit_check and settings.loader.name != AUTO):
        return name
    stage, where, need, have = misfit
    fitting = [n for n, plan in plans.items() if first_misfit(plan, cap) is None]
    fits = ", ".join(f"{n} ({plans[n].node_peak_gib():.1f} GiB)" for n in fitting) or "none (fewer ranks, ZeRO-3 or offload)"
    raise ConfigError(
        f"plan: loader={name} needs {need:.1f} GiB of {where} memory at {stage}, {have:.1f} GiB can be used "
        f"{'here' if cap.read_here else 'on machine=' + cap.name}; "
        f"loaders that fit: {fits}; or plan.fit_check=false"
    )
