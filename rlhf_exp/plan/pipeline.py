"""The one plan entry point: the roles' shapes, the target machine, a rank's base footprint and every usable
loader's plan, for the job (job/prepare.py), the `plan` command and the SLURM launcher's memory request alike."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlhf_exp.config.schema import RunSettings
from rlhf_exp.plan.fit import all_plans, pick
from rlhf_exp.plan.inputs import existing_checkpoints, rank_base, role_shapes, target_machine
from rlhf_exp.plan.machine import Target
from rlhf_exp.plan.terms import Plan, RankBase, RoleShape


@dataclass(frozen=True)
class Planned:
    settings: RunSettings
    target: Target
    shapes: dict[str, RoleShape]
    base: RankBase
    plans: dict[str, Plan]  # every usable loader's

    def picked(self) -> str:
        """The loader that runs: the configured one, or loader=auto's pick on this target."""
        return pick(self.settings, self.plans, self.target)


def plan_settings(
    settings: RunSettings,
    device: str | None,
    checkpoints: dict[str, Path | None] | None = None,
    target: Target | None = None,
    persist: bool = True,
) -> Planned:
    """Plan `settings` on `target` (default: machine=local's host with its ranks on `device`, or the declared node),
    sized from `checkpoints` (default: those on disk; an ungenerated preset from its config). persist=False: the
    rank-footprint probe, where it runs, is not written yet (a job not yet known to fit writes nothing)."""
    target = target or target_machine(settings, device)
    shapes = role_shapes(settings, existing_checkpoints(settings) if checkpoints is None else checkpoints)
    base = rank_base(target, Path(settings.model.cache_dir), persist)
    return Planned(settings, target, shapes, base, all_plans(settings, shapes, target, base))
