"""`python -m rlhf_exp plan [overrides]`: the memory plan of a config, beside this machine's capacity.

Nothing is loaded or generated: shapes come from config.json or the preset, checkpoint bytes from the
files when they exist. Prints the plan of the configured loader (or auto's pick), marking the first stage
that does not fit, then one line per loader.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException
from rich.console import Console
from rich.table import Table

from rlhf_exp.cli.argv_checks import check_group_choices, check_override_keys
from rlhf_exp.config.compose import compose_config
from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.schema import RunSettings, validate

if TYPE_CHECKING:
    from rlhf_exp.plan.advice import Alternative
    from rlhf_exp.plan.machine import Target
    from rlhf_exp.plan.terms import Plan


def plan_config(overrides: list[str]) -> tuple[RunSettings, dict[str, Plan], Target, Callable[[], list[Alternative]]]:
    """Every usable loader's plan for the composed config, the machine they are checked against, and a function
    giving what would fit instead. Raises ConfigError."""
    try:
        cfg = compose_config(overrides)
    except (HydraException, OmegaConfBaseException) as err:  # e.g. a sweep value: plan takes one config
        raise ConfigError(f"overrides: {str(err).strip().splitlines()[0]}") from None
    settings = validate(cfg)
    import torch

    from rlhf_exp.config.deepspeed import check_role_configs
    from rlhf_exp.job.device import resolve_device
    from rlhf_exp.plan.advice import alternatives
    from rlhf_exp.plan.inputs import target_machine
    from rlhf_exp.plan.pipeline import plan_settings

    os.environ.setdefault("DS_ACCELERATOR", "cuda" if torch.cuda.is_available() else "cpu")  # no accelerator probe
    # a declared node has its own GPUs, whatever this host has
    target = target_machine(settings, resolve_device(settings)[0] if settings.machine.name == "local" else None)
    check_role_configs(settings, target.device)
    p = plan_settings(settings, target.device, target=target)
    return settings, p.plans, target, lambda: alternatives(settings, p.shapes, target, p.base)


USAGE = """usage: python -m rlhf_exp plan [--json] [overrides]
The memory plan of one config, stage by stage (engine and the first PPO step), beside the capacity of the machine:
this host, or machine=<preset> / machine.host_gib=... for the node you will submit to (no GPU needed here).
Nothing is loaded or generated. Takes the job's overrides (python -m rlhf_exp --help lists them).
--json prints the same as one JSON document. Exit 0 when the plan fits, 1 when not."""


def report(
    settings: RunSettings, plans: dict[str, Plan], target: Target, advise: Callable[[], list[Alternative]]
) -> dict[str, Any]:
    """The plan as data: what --json prints and the table shows (the alternatives only when it does not fit)."""
    from rlhf_exp.plan.fit import first_misfit, pick

    name = pick(settings, plans, target)
    misfit = first_misfit(plans[name], target)

    def verdict(plan: Plan) -> dict[str, Any]:
        miss = first_misfit(plan, target)
        return {
            "fits": miss is None,
            "first_misfit": miss._asdict() if miss else None,
            "node_peak_gib": plan.node_peak_gib(),
            "gpu_need_peak_gib": max(st.gpu_need_gib for st in plan.stages),
        }

    return {
        "loader": name,
        "requested_loader": settings.loader.name,
        "machine": target.to_dict(),
        **verdict(plans[name]),
        "plan": plans[name].to_dict(),
        "loaders": {other: verdict(plan) for other, plan in plans.items()},
        "alternatives": [asdict(a) for a in advise()] if misfit else [],
    }


def print_report(doc: dict[str, Any], target: Target) -> None:
    from rlhf_exp.plan.fit import verdict_of
    from rlhf_exp.plan.terms import plan_stages

    console = Console(width=160)
    miss = doc["first_misfit"]
    table = Table(title=f"plan: loader={doc['loader']}, {doc['plan']['ranks']} rank(s) on {doc['plan']['device']}")
    for col in ("stage", "rank peak GiB", "node peak GiB", "GPU/rank GiB (torch)", "GPU/rank GiB (card needs)", ""):
        table.add_column(col, justify="left" if col in ("stage", "") else "right")
    for st in plan_stages(doc["plan"]):
        mark = f"does not fit ({miss['memory']})" if miss and st.stage == miss["stage"] else ""
        cells = (st.rank_peak_gib, st.node_peak_gib, st.gpu_rank_gib, st.gpu_need_gib)
        table.add_row(st.stage, *(f"{c:.3f}" for c in cells), mark)
    console.print(table)
    console.print(f"machine: {target.describe()}")
    for other, v in doc["loaders"].items():
        console.print(
            f"  {other:16s} node peak {v['node_peak_gib']:8.2f} GiB  GPU {v['gpu_need_peak_gib']:7.2f} GiB  "
            f"{verdict_of(v['first_misfit'])}"
        )
    if miss:
        fits = [o for o, v in doc["loaders"].items() if v["fits"]]
        console.print(f"loaders that fit: {', '.join(fits) or 'none'}")
        width = max((len(alt["overrides"]) for alt in doc["alternatives"]), default=0)
        for alt in doc["alternatives"]:
            state = "fits" if alt["loader"] else "does not fit either"
            figures = f"node peak {alt['node_peak_gib']:.1f} GiB, GPU {alt['gpu_need_gib']:.1f} GiB"
            console.print(f"  {alt['overrides']:{width}s} {state}: {figures}")


def main(overrides: list[str]) -> int:
    if any(a in ("--help", "-h") for a in overrides):
        print(USAGE)
        return 0
    as_json = "--json" in overrides
    overrides = [a for a in overrides if a != "--json"]
    if any(a in ("-m", "--multirun") for a in overrides):
        print("error: plan: -m: plan one config at a time (drop -m and give single values)", file=sys.stderr)
        return 2
    bad = check_group_choices(overrides) or check_override_keys(overrides)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    try:
        settings, plans, target, advise = plan_config(overrides)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    doc = report(settings, plans, target, advise)
    if as_json:
        print(json.dumps(doc, indent=1))
    else:
        print_report(doc, target)
    return 0 if doc["fits"] else 1
