"""Planned against measured for every job: a markdown table per job, and the tolerance the CPU tests assert.

    python -m bench plan-check <sweep or results dir> [...] [--replan]     # any dir of result files

Figures: rlhf_exp.plan.compare (the plan each job stored beside its measurement, and the job's own
kernel/torch.cuda readings).
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.scenario import Context
from bench.tools import verdicts
from rlhf_exp.plan.compare import GPU_REL_TOL, HOST_ABS_TOL_GIB, HOST_REL_TOL, compare


def job_table(result: dict) -> str:
    head = f"### {result['loader']}, gpus={result['gpus']}, device={result['device']}, status={result['status']}\n\n"
    lines = [
        "| stage | rank rise plan | measured | node plan | measured | net of per-CPU lists | GPU/rank plan | torch.cuda peak "
        "| GPU device plan | NVML peak | within |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = compare(result)
    for r in rows:
        cells = [
            r["stage"],
            r["rank_rise_planned"],
            r["rank_rise_measured"],
            r["node_planned"],
            r["node_measured"],
            r["node_net_measured"],
            r["gpu_planned"],
            r["gpu_measured"],
            r["gpu_device_planned"],
            r["gpu_device_measured"],
            "yes" if r["ok"] else "NO",
        ]
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return head + "\n".join(lines) + "\n" + moved_where_missed(result, rows)


def moved_where_missed(result: dict, rows: list[dict]) -> str:
    """Under the table, for each stage out of tolerance, what else moved on the node since the baseline (the
    watcher's /proc/meminfo snapshots): the job's own pages (AnonPages) beside memory outside it (Balloon, Cached)."""
    stages = {st["stage"]: st for st in result.get("stages", [])}
    lines = []
    for r in rows:
        moved = stages.get(r["stage"], {}).get("meminfo_moved_gib")
        if not r["ok"] and moved:
            lines.append(f"- {r['stage']}: /proc/meminfo moved from the baseline: " + ", ".join(
                f"{k} {v:+.2f}" for k, v in sorted(moved.items(), key=lambda kv: -abs(kv[1]))))  # fmt: skip
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def replan(result: dict) -> dict:
    """The result with its plan recomputed by today's formulas (shapes from the config's presets, the base
    footprint the job measured), to compare formulas changed after a run against that run's measurements."""
    from rlhf_exp.config.schema import RunSettings
    from rlhf_exp.config.units import GIB
    from rlhf_exp.plan.formulas import make_plan
    from rlhf_exp.plan.inputs import role_shapes
    from rlhf_exp.plan.machine import Target
    from rlhf_exp.plan.terms import RankBase

    config = result["config"]
    settings = RunSettings.model_validate({**config, "loader": {**config["loader"], "name": result["loader"]}})
    old = result["plan"]
    n = settings.gpus  # the measured runs: one node holding every rank
    recorded = old.get("machine")  # the job's own target (its cores set fast_read's threads); older results lack it
    shared = n if config.get("share_gpus") else 1
    target = Target(**recorded) if recorded else Target("local", result["device"], 0, 0, None, n, 1, n, shared)
    dist = next(st for st in result["stages"] if st["stage"] == "dist_init")  # the base as this job measured it
    base = RankBase(old["base_rank_gib"] * GIB, (old.get("base_private_gib") or dist["rank_pss_anon_peak_max_gib"]) * GIB)
    plan = make_plan(settings, result["loader"], role_shapes(settings, {}), target, base)
    return {**result, "plan": {**old, **plan.to_dict()}}


TOLERANCE = (
    f"Tolerance: rank rise and node peak within max({HOST_REL_TOL:.0%} of measured, {HOST_ABS_TOL_GIB} GiB); "
    f"GPU within {GPU_REL_TOL:.0%}. GiB throughout.\n\n"
)


def result_files(folder: Path) -> list[Path]:
    """A sweep's job result files, or a results folder's copied ones."""
    return sorted(folder.glob("**/result.json")) or sorted(
        f for f in folder.glob("**/*.json") if "checkpoint_gib" in json.loads(f.read_text() or "{}")
    )


def check(folders: list[Path], replan_plans: bool = False) -> str:
    text = ("Plans recomputed with the current formulas (--replan). " if replan_plans else "") + TOLERANCE
    for folder in folders:
        for f in result_files(folder):
            result = json.loads(f.read_text())
            lacks = [key for key in ("plan", "config") if not result.get(key)]
            if lacks:  # a result written before jobs stored their plan and config
                text += f"### {f}: no {' or '.join(lacks)} stored; nothing to compare\n\n"
                continue
            text += job_table(replan(result) if replan_plans else result) + "\n"
    return text


def table(ctx: Context) -> str:
    """Every job that wrote a result, a failed one's stages up to its failure with where its plan said it would fail."""
    text = TOLERANCE
    for job in ctx.jobs:
        if job.result:
            text += f"run {job.run}: " + job_table(job.result) + "\n"
            if job.result["status"] != "completed":
                where, reason = verdicts.ended(job.result)
                text += f"{where} ({reason}); the plan: {verdicts.plan_says(job.result)}\n\n"
    missing = [f"{j.run}/{j.label}" for j in ctx.jobs if not j.result]
    return text + (f"no result.json: {', '.join(missing)}\n" if missing else "")
