"""Everything decided before any rank starts: device, checkpoints (generated once), their checks, the plan.

Nothing is written until every check the config decides has passed: the plan and its fit check come before any
preset checkpoint is generated, and the job dir is touched last (a rerun that fails a check keeps the previous
run's records).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

from rlhf_exp.checkpoints.checks import check_checkpoint
from rlhf_exp.checkpoints.files import weight_bytes
from rlhf_exp.checkpoints.generate import check_cache_dir, existing_checkpoint, resolve_checkpoint
from rlhf_exp.config.deepspeed import check_role_configs
from rlhf_exp.config.roles import CHECKPOINT_KIND
from rlhf_exp.config.schema import RunSettings
from rlhf_exp.config.units import gib
from rlhf_exp.job.device import resolve_device
from rlhf_exp.job.emulate import check_host_cap
from rlhf_exp.jobdir import JobDir, JobSpec
from rlhf_exp.memory.heap import release_freed_heap
from rlhf_exp.memory.settle import settle_node
from rlhf_exp.plan.fit import Misfit, choose, first_misfit
from rlhf_exp.plan.inputs import rank_base
from rlhf_exp.plan.pipeline import plan_settings
from rlhf_exp.plan.terms import plan_stages

# the node settles before the baseline after the job wrote this much (memory/settle.py: a first run read up to 1 GiB
# low); below it the tiny presets of a test or a first try skip the 10 s and more it takes
SETTLE_AFTER_WRITING_BYTES = 1 << 30
SETTLE_LIMIT_S = 120


def checkpoint_dirs(settings: RunSettings, generate: bool) -> dict[str, Path | None]:
    """Actor and critic checkpoint dirs, each checked: a user's path always; a preset's when it is on disk, and with
    `generate` generated first (once, under a lock). Without it an ungenerated preset is None (planned from its
    config)."""
    m, out = settings.model, {}
    for which, kind in CHECKPOINT_KIND.items():
        spec = getattr(m, which)
        if generate:
            out[which] = resolve_checkpoint(spec.preset, spec.path, kind, m.checkpoint_dtype, m.cache_dir)
        else:
            out[which] = existing_checkpoint(spec.preset, spec.path, kind, m.checkpoint_dtype, m.cache_dir)
        if out[which] is not None:
            check_checkpoint(f"model.{which}.{'path' if spec.path else 'preset'}", out[which], kind)
    return out


def plan_job(
    settings: RunSettings, device: str, checkpoints: dict[str, Path | None], requested: str | None = None
) -> tuple[RunSettings, dict[str, Any]]:
    """Plan every usable loader, pick the one to run (loader=auto, fit check) and return its plan record;
    `requested`: the loader the user asked for, when `settings` already holds an earlier pick.

    Raises ConfigError when the chosen plan does not fit this machine (plan.fit_check): before that nothing is
    written, not even the rank-footprint probe's cache."""
    planned = plan_settings(settings, device, dict(checkpoints), persist=False)
    plans, cap = planned.plans, planned.target
    requested, loader = requested or settings.loader.name, choose(settings, plans, cap)
    rank_base(cap, Path(settings.model.cache_dir))  # it fits: the probe (measured once per environment) is kept
    settings = settings.model_copy(update={"loader": settings.loader.model_copy(update={"name": loader})})
    misfit = first_misfit(plans[loader], cap)
    return settings, {
        **plans[loader].to_dict(),
        "requested_loader": requested,
        "capacity_host_gib": gib(cap.host_bytes, 3),
        "capacity_gpu_gib": gib(cap.gpu_bytes, 3),
        "machine": cap.to_dict(),
        "fits": misfit is None,
        "first_misfit": misfit._asdict() if misfit else None,
        "others": {name: plan.node_peak_gib() for name, plan in plans.items()},
    }


def plan_verdict(plan: dict[str, Any]) -> str:
    """One line for the console: the plan of the loader that runs, against what this machine offers."""
    stages = plan_stages(plan)
    peak = max(st.node_peak_gib for st in stages)
    room = f"node peak {peak:.2f} GiB of {plan['capacity_host_gib']:.1f} GiB usable"
    if plan.get("capacity_gpu_gib"):  # what the fit check compares: what a card needs, times the ranks sharing it
        per_gpu = plan["machine"]["ranks_per_gpu"]
        gpu = max(st.gpu_need_gib for st in stages) * per_gpu
        share = f" ({per_gpu} ranks)" if per_gpu > 1 else ""
        room += f", GPU {gpu:.2f} GiB of {plan['capacity_gpu_gib']:.1f} GiB per GPU{share}"
    verdict = "fits" if plan["fits"] else f"{Misfit(**plan['first_misfit']).describe()} (plan.fit_check=false)"
    return f"plan: loader={plan['loader']}, {room}: {verdict}"


def prepare_job(settings: RunSettings, config: dict[str, Any], job_dir: JobDir, run_id: str) -> JobSpec:
    """Device, checkpoints, checks and plan, then (only then) a fresh job dir with plan.json and spec.json.

    Raises ConfigError (one line) on any check."""
    check_cache_dir(Path(settings.model.cache_dir))
    check_host_cap(settings, f"rlhf_exp-{run_id}-probe")  # machine.emulate_host_with=cgroup: this host allows one
    device, backend = resolve_device(settings)
    os.environ["DS_ACCELERATOR"] = device  # DeepSpeed's accelerator as the job decided it, quietly (ranks inherit it)
    check_role_configs(settings, device)
    # what the config alone decides, before anything is written: a job refused here generates no checkpoint
    checkpoints = checkpoint_dirs(settings, generate=False)
    settings, plan = plan_job(settings, device, checkpoints)
    generated = [which for which, path in checkpoints.items() if path is None]
    if generated:  # presets generated now, then planned again from their files (the same loader)
        checkpoints = checkpoint_dirs(settings, generate=True)
        settings, plan = plan_job(settings, device, checkpoints, requested=plan["requested_loader"])
    gc.collect()
    release_freed_heap()  # what generating checkpoints freed leaves the node before the baseline sample
    if sum(weight_bytes(checkpoints[which]) for which in generated) >= SETTLE_AFTER_WRITING_BYTES:
        print(f"after writing checkpoints, {settle_node(limit_s=SETTLE_LIMIT_S).describe()}", flush=True)
    spec = JobSpec(settings, plan, device, backend, checkpoints, config, run_id)
    job_dir.clear()
    job_dir.write_plan(plan)
    job_dir.write_spec(spec)
    return spec
