"""`python -m rlhf_exp plan [overrides]`: the memory plan of a config, beside this machine's capacity.

Nothing is loaded or generated: shapes come from config.json or the preset, checkpoint bytes from the
files when they exist. Prints the plan of the configured loader (or auto's pick), marking the first stage
that does not fit, then one line per loader.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException
from rich.console import Console
from rich.table import Table

from rlhf_exp.cli.argv_checks import check_group_choices, check_override_keys
from rlhf_exp.config.compose import compose_config
from rlhf_exp.config.roles import CHECKPOINT_KIND
from rlhf_exp.config.schema import ConfigError, RunSettings, validate
from rlhf_exp.config.units import GIB

if TYPE_CHECKING:
    from rlhf_exp.plan.fit import Capacity
    from rlhf_exp.plan.terms import Plan


def plan_config(overrides: list[str]) -> tuple[RunSettings, str, dict[str, Plan], Capacity]:
    """Every usable loader's plan for the composed config, and this machine's capacity. Raises ConfigError."""
    try:
        cfg = compose_config(overrides)
    except (HydraException, OmegaConfBaseException) as err:  # e.g. a sweep value: plan takes one config
        raise ConfigError(f"overrides: {str(err).strip().splitlines()[0]}") from None
    settings = validate(cfg)
    from rlhf_exp.checkpoints.generate import existing_checkpoint
    from rlhf_exp.config.deepspeed import check_role_configs
    from rlhf_exp.job.device import resolve_device
    from rlhf_exp.plan.inputs import plans_here

    device, _ = resolve_device(settings)
    check_role_configs(settings, device)
    m = settings.model
    checkpoints = {
        which: existing_checkpoint(getattr(m, which).preset, getattr(m, which).path, kind, m.checkpoint_dtype, m.cache_dir)
        for which, kind in CHECKPOINT_KIND.items()
    }
    plans, cap = plans_here(settings, device, checkpoints)
    return settings, device, plans, cap


USAGE = """usage: python -m rlhf_exp plan [overrides]
The memory plan of one config, stage by stage, beside this machine's capacity; nothing is loaded or generated.
Takes the job's overrides (python -m rlhf_exp --help lists them); exit 0 when the plan fits, 1 when not."""


def main(overrides: list[str]) -> int:
    if any(a in ("--help", "-h") for a in overrides):
        print(USAGE)
        return 0
    if any(a in ("-m", "--multirun") for a in overrides):
        print("error: plan: -m: plan one config at a time (drop -m and give single values)", file=sys.stderr)
        return 2
    bad = check_group_choices(overrides) or check_override_keys(overrides)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    try:
        settings, device, plans, cap = plan_config(overrides)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from rlhf_exp.plan.fit import first_misfit, pick

    name = pick(settings, plans, cap)
    plan, misfit = plans[name], first_misfit(plans[name], cap)
    console = Console(width=160)
    table = Table(title=f"plan: loader={name}, {settings.gpus} rank(s) on {device}")
    for col in ("stage", "rank peak GiB", "node peak GiB", "GPU/rank GiB", ""):
        table.add_column(col, justify="left" if col in ("stage", "") else "right")
    for st in plan.stages:
        mark = "does not fit" if misfit and st.stage == misfit[0] else ""
        table.add_row(st.stage, f"{st.rank_peak_gib:.3f}", f"{st.node_peak_gib:.3f}", f"{st.gpu_rank_gib:.3f}", mark)
    console.print(table)
    gpu = f", GPU {cap.gpu_bytes / GIB:.1f} GiB ({cap.ranks_per_gpu} rank(s) per GPU)" if cap.gpu_bytes else ""
    console.print(f"capacity: host {cap.host_bytes / GIB:.1f} GiB usable (plan.host_fraction={settings.plan.host_fraction}){gpu}")
    for other, p in plans.items():
        miss = first_misfit(p, cap)
        console.print(
            f"  {other:16s} node peak {p.node_peak_gib():8.3f} GiB  " + (f"does not fit at {miss[0]}" if miss else "fits")
        )
    return 0 if misfit is None else 1
