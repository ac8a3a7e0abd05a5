"""The fit check proven by running: each configuration runs under machine.emulate twice, capped at its plan (it must
complete) and 5 % below what that run measurably needed (it must fail, at the stage the plan names).

The caps at plan come from the job's own plan, made first (`python -m rlhf_exp plan --json`, the same overrides on this
machine): its node peak over plan.host_fraction and what the fit check asks of a card (the plan's need with the
planner's error, fit.gpu_fit_need). The run at plan is also the measurement: the need is its node's measured peak
(node_peak_gib, above the level before ranks started, over plan.host_fraction) and, on a GPU, the least a capped
allocator runs in: the largest rank's torch peak allocated plus the CUDA context as the cap counts it (the larger of
dist_init's measured one and the plan's; the cache torch reserves beyond its peak is given back under a cap before an
out-of-memory).

Below the need, a resource is capped only where the cap's line falls clear of that resource's noise at every stage up
to the first one over it: otherwise which stage crosses first is chance, not the plan's to name (a GPU job's node
figure: about 2.4 GiB in every PPO stage, moving 0.3 GiB between identical runs). A resource not capped there keeps
this machine's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from typing import Any

from bench import GIB, REPO
from bench.jobs import job_overrides, loaders_of, record, run_job, runs_of
from bench.scenario import Context, JobResult, Run
from bench.tools.tables import markdown
from rlhf_exp.config.compose import compose_config
from rlhf_exp.config.schema import validate
from rlhf_exp.plan.fit import gpu_fit_need
from rlhf_exp.plan.formulas import CUDA_CONTEXT_GPU
from rlhf_exp.plan.terms import plan_stages

BELOW = 0.95  # the need less 5 %
AT_PLAN, UNDER = "at-plan", "below-need"
# how far one stage's figure moves between identical runs: the node's used memory (other processes, the kernel's
# reclaim; fit-check-2026-12-05 against seed-2026-12-05, the same PPO stages), torch's allocations (deterministic)
NOISE_GIB = {"host_gib": 0.3, "gpu_gib": 0.1}
# a dry run's cap at plan, above the plan: a tiny CPU rank's cgroup also holds what its plan leaves to the node's noise
# (library pages, the interpreter's arenas), 0.3 GiB and more; the dry run proves the plumbing, not the plan
DRY_HOST_SLACK_GIB = 1.0


def planned_caps(plan_doc: dict[str, Any], host_fraction: float) -> dict[str, float]:
    """The caps at plan, from `plan --json`'s document."""
    plan = plan_doc["plan"]
    caps = {"host_gib": max(st.node_peak_gib for st in plan_stages(plan)) / host_fraction}
    if plan["device"] == "cuda":  # what the fit check asks of a card: the plan's need with its error
        caps["gpu_gib"] = max(gpu_fit_need(st) for st in plan_stages(plan))
    return caps


def stage_needs(result: dict[str, Any]) -> dict[str, list[tuple[str, float]]]:
    """Each resource's measured figure per stage, as its cap counts it (host over plan.host_fraction)."""
    fraction = result["config"]["plan"]["host_fraction"]
    needs = {"host_gib": [(s["stage"], (s.get("node_peak_gib") or 0.0) / fraction) for s in result["stages"]]}
    if result["device"] == "cuda":
        contexts = [s["cuda_context_gib"] for s in result["stages"] if s.get("cuda_context_gib") is not None]
        context = max([*contexts, CUDA_CONTEXT_GPU / GIB])
        peaks = [(s["stage"], max((r.get("cuda_peak_allocated_gib") or 0.0) for r in s["per_rank"])) for s in result["stages"]]
        needs["gpu_gib"] = [(stage, peak + context) for stage, peak in peaks]
    return needs


def measured_need(result: dict[str, Any]) -> dict[str, float]:
    return {key: max(value for _, value in figures) for key, figures in stage_needs(result).items()}


def clear_of_noise(figures: list[tuple[str, float]], cap: float, noise: float) -> bool:
    """Whether the first stage over `cap` is over it by more than `noise`, and every stage before it under by more."""
    for _, value in figures:
        if value > cap:
            return value - cap > noise
        if cap - value <= noise:
            return False
    return False


def caps_below(result: dict[str, Any], dry: bool) -> dict[str, float]:
    """5 % below the need, for each resource whose cap falls clear of its noise (a dry run: every one, the plumbing).
    A need of zero or less (the node freed more than the job took: a tiny CPU job beside a neighbour's) has no cap
    below it: the app refuses a cap that is not positive."""
    caps = {}
    for key, figures in stage_needs(result).items():
        cap = BELOW * max(value for _, value in figures)
        if cap > 0 and (dry or clear_of_noise(figures, cap, NOISE_GIB[key])):
            caps[key] = cap
    return caps


def plan_document(overrides: list[str]) -> dict[str, Any]:
    """The job's plan on this machine, before it runs: what the app itself plans (`plan --json`)."""
    cmd = [sys.executable, "-m", "rlhf_exp", "plan", "--json", *overrides]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    return json.loads(proc.stdout)  # exit 1 says it does not fit here: the document is printed all the same


def _capped(run: Run, caps: dict[str, float], suffix: str) -> Run:
    extra = ("machine.emulate=true", *(f"machine.{key}={value:.3f}" for key, value in caps.items()))
    return replace(run, name=f"{run.name}-{suffix}", overrides=(*run.overrides, *extra))


def run_jobs(ctx: Context) -> None:
    """Each configuration capped at its plan, then, where that completed, 5 % below what it needed."""
    for run in runs_of(ctx):
        for loader in loaders_of(run, ctx):
            overrides = job_overrides(run, loader, ctx)
            plan = planned_caps(plan_document(overrides), validate(compose_config(overrides)).plan.host_fraction)
            if ctx.dry:  # the plumbing: a tiny CPU job's cgroup holds more than its plan's node figure says
                plan["host_gib"] += DRY_HOST_SLACK_GIB
            at_plan = run_job(_capped(run, plan, AT_PLAN), loader, ctx, REPO, loader)
            record(ctx, at_plan)
            facts = ctx.facts.setdefault(run.name, {})[loader] = {"plan": plan}
            if not at_plan.result or at_plan.result["status"] != "completed":
                continue
            facts["need"], facts["below"] = measured_need(at_plan.result), caps_below(at_plan.result, ctx.dry)
            if facts["below"]:
                record(ctx, run_job(_capped(run, facts["below"], UNDER), loader, ctx, REPO, loader))


def _outcome(job: JobResult | None) -> str:
    if job is None or job.result is None:
        return "no result"
    failure = job.result.get("failure") or {}
    return "completed" if job.result["status"] == "completed" else f"failed at {failure.get('stage')}"


def table(ctx: Context) -> str:
    jobs = {(j.run, j.label): j for j in ctx.jobs}
    rows = []
    for run in ctx.scenario.runs:
        for label, facts in ctx.facts.get(run.name, {}).items():
            at_plan, under = jobs.get((f"{run.name}-{AT_PLAN}", label)), jobs.get((f"{run.name}-{UNDER}", label))
            plan_says = (under.result or {}).get("plan", {}) if under else {}
            named = plan_says["first_misfit"]["stage"] if plan_says and not plan_says.get("fits") else None
            completed = _outcome(at_plan) == "completed"
            right = completed and named is not None and _outcome(under) == f"failed at {named}"
            rows.append(
                {
                    "config": run.name,
                    "loader": label,
                    "caps at plan (host, GPU GiB)": _caps(facts.get("plan")),
                    "run at plan": _outcome(at_plan),
                    "need (host, GPU GiB)": _caps(facts.get("need")),
                    "caps 5 % below": _caps(facts.get("below")) or ("none clear of noise" if completed else None),
                    "plan names": named or ("fits" if under else None),
                    "run below": _outcome(under) if under else None,
                    "verdict right": "yes" if right else "NO",
                }
            )
    return markdown(rows) if rows else "no configuration ran\n"


def _caps(caps: dict[str, float] | None) -> str | None:
    if not caps:
        return None
    return ", ".join(f"{key.removesuffix('_gib')} {caps[key]:.2f}" for key in ("host_gib", "gpu_gib") if key in caps)
