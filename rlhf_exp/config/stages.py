"""Stage names, spelled once: `dist_init`, `<role>.load`, `<role>.init`, then `ppo<k>.<part>` per PPO step.

Kept free of heavy imports so reports and tests can use it without pulling in deepspeed.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlhf_exp.config.roles import ROLES

DIST_INIT = "dist_init"
ENGINE_PHASES = ("load", "init")
PPO_PARTS = ("generate", "score", "train_actor", "train_critic")


def engine_stage(role: str, phase: str) -> str:
    return f"{role}.{phase}"


def ppo_stage(step: int, part: str) -> str:
    return f"ppo{step}.{part}"


def engine_stages(roles: Sequence[str] = ROLES) -> list[str]:
    return [engine_stage(r, p) for r in roles for p in ENGINE_PHASES]


def ppo_stages(steps: int) -> list[str]:
    return [ppo_stage(k, part) for k in range(1, steps + 1) for part in PPO_PARTS]


def job_stages(roles: Sequence[str] = ROLES, ppo_steps: int = 0) -> list[str]:
    """Every stage a job records, in order."""
    return [DIST_INIT, *engine_stages(roles), *ppo_stages(ppo_steps)]


def is_load_stage(name: str) -> bool:
    return name.endswith(".load")
