"""The fit check proven by running: each configuration measured once, then run twice under machine.emulate, capped at
its plan (it must complete) and 5 % below what it measurably needed (it must fail, at the stage the plan names).

Caps from the first run's result.json: the plan's node peak over plan.host_fraction and what its plan says a card
needs (the fit check's GPU figure). The need: the node's measured peak (node_peak_gib, above the level before ranks
started) and, on a GPU, the least a capped allocator runs in: the largest rank's torch peak allocated plus the CUDA
context as the cap counts it (the larger of dist_init's measured one and the plan's; the cache torch reserves beyond
its peak is given back under a cap before an out-of-memory).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench import REPO
from bench.jobs import record, run_job
from bench.scenario import Context, JobResult, Run
from bench.tools.tables import markdown
from rlhf_exp.plan.formulas import CUDA_CONTEXT_GPU

BELOW = 0.95  # the need less 5 %
AT_PLAN, UNDER = "at-plan", "below-need"
GIB = 2**30


def _max(result: dict[str, Any], key: str) -> float:
    return max((s.get(key) or 0.0 for s in result["stages"]), default=0.0)


def planned_caps(result: dict[str, Any]) -> dict[str, float]:
    plan, fraction = result["plan"], result["config"]["plan"]["host_fraction"]
    caps = {"host_gib": max(s["node_peak_gib"] for s in plan["stages"]) / fraction}
    if result["device"] == "cuda":
        caps["gpu_gib"] = max(s["gpu_need_gib"] for s in plan["stages"])
    return caps


def measured_need(result: dict[str, Any]) -> dict[str, float]:
    need = {"host_gib": _max(result, "node_peak_gib") / result["config"]["plan"]["host_fraction"]}
    if result["device"] == "cuda":  # the least a capped allocator can run in: its largest rank's peak and its context
        allocated = max((r.get("cuda_peak_allocated_gib") or 0.0 for s in result["stages"] for r in s["per_rank"]), default=0.0)
        contexts = [s["cuda_context_gib"] for s in result["stages"] if s.get("cuda_context_gib") is not None]
        need["gpu_gib"] = allocated + max([*contexts, CUDA_CONTEXT_GPU / GIB])
    return need


def _capped(run: Run, caps: dict[str, float], suffix: str) -> Run:
    extra = ("machine.emulate=true", *(f"machine.{key}={value:.3f}" for key, value in caps.items()))
    return replace(run, name=f"{run.name}-{suffix}", overrides=(*run.overrides, *extra))


def capped_runs(ctx: Context) -> None:
    """After each configuration's own run: the same job capped at its plan, then 5 % below its measured need."""
    runs = {run.name: run for run in ctx.scenario.runs}
    for job in list(ctx.jobs):
        if job.run not in runs or not job.result or job.result.get("status") != "completed":
            continue
        run = runs[job.run]
        plan, need = planned_caps(job.result), measured_need(job.result)
        ctx.facts[job.run] = {"plan": plan, "need": need}
        for suffix, caps in ((AT_PLAN, plan), (UNDER, {key: BELOW * value for key, value in need.items()})):
            record(ctx, run_job(_capped(run, caps, suffix), job.label, ctx, REPO, job.label))


def _outcome(job: JobResult | None) -> str:
    if job is None or job.result is None:
        return "no result"
    failure = job.result.get("failure") or {}
    return "completed" if job.result["status"] == "completed" else f"failed at {failure.get('stage')}"


def table(ctx: Context) -> str:
    jobs = {(j.run, j.label): j for j in ctx.jobs}
    rows = []
    for run in ctx.scenario.runs:
        for label in {j.label for j in ctx.jobs if j.run == run.name}:
            at_plan, under = jobs.get((f"{run.name}-{AT_PLAN}", label)), jobs.get((f"{run.name}-{UNDER}", label))
            facts = ctx.facts.get(run.name, {})
            plan_says = (under.result or {}).get("plan", {}) if under else {}
            named = plan_says.get("first_misfit") if plan_says and not plan_says.get("fits") else None
            right = _outcome(at_plan) == "completed" and named is not None and _outcome(under) == f"failed at {named}"
            rows.append(
                {
                    "config": run.name,
                    "loader": label,
                    "caps at plan (host, GPU GiB)": _caps(facts.get("plan")),
                    "run at plan": _outcome(at_plan),
                    "need (host, GPU GiB)": _caps(facts.get("need")),
                    "caps 5 % below": _caps({k: BELOW * v for k, v in facts.get("need", {}).items()} or None),
                    "plan names": named or "fits",
                    "run below": _outcome(under),
                    "verdict right": "yes" if right else "NO",
                }
            )
    return markdown(rows) if rows else "no configuration completed its own run\n"


def _caps(caps: dict[str, float] | None) -> str | None:
    if not caps:
        return None
    return ", ".join(f"{caps[k]:.2f}" for k in ("host_gib", "gpu_gib") if k in caps)
