"""Host figures per loader: how far node memory rose while every rank loaded the actor, against the checkpoint."""

from __future__ import annotations

from bench.scenario import Context
from bench.tools.tables import markdown

ROLES = ("actor", "ref", "critic", "reward")


def row_of(result: dict) -> dict:
    stages = {s["stage"]: s for s in result["stages"]}
    ckpt = result["checkpoint_gib"]["actor"]
    actor = stages.get("actor.load", {})
    gpu_peaks = [s.get("gpu_cuda_peak_allocated_gib") for s in result["stages"] if s.get("gpu_cuda_peak_allocated_gib")]
    rise = actor.get("node_rise_gib")
    return {
        "loader": result["loader"],
        "gpus": result["gpus"],
        "status": result["status"],
        "node_peak_gib": result.get("node_peak_gib"),
        "actor_load_rise_gib": rise,
        "actor_load_rise_x_ckpt": round(rise / ckpt, 2) if rise is not None else None,
        "actor_load_pss_anon_rank_max_gib": actor.get("rank_pss_anon_peak_max_gib"),
        **{f"{r}_load_s": round(stages[f"{r}.load"]["duration_s"] or 0, 2) if f"{r}.load" in stages else None for r in ROLES},
        "gpu_peak_alloc_gib": max(gpu_peaks) if gpu_peaks else None,
        "wall_s": result.get("wall_s"),
    }


def table(ctx: Context) -> str:
    """Every job, failed ones too (naive at 8 ranks may be stopped by the watchdog: its stage is the figure)."""
    rows = []
    for job in ctx.jobs:
        if job.result:
            failure = job.result.get("failure") or {}
            rows.append({"run": job.run, **row_of(job.result), "failed_at": failure.get("stage")})
    return markdown(rows) if rows else "no job wrote a result\n"
