"""Planned against measured for every job of one or more sweeps: a markdown table per job.

    python bench/plan_check.py <sweep dir> [...] [--out FILE]

Figures: rlhf_exp.plan.compare (the plan each job stored beside its measurement, and the job's own
kernel/torch.cuda readings). The tolerance line is the one the CPU tests assert.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlhf_exp.plan.compare import GPU_REL_TOL, HOST_ABS_TOL_GIB, HOST_REL_TOL, compare


def job_table(result: dict) -> str:
    head = f"### {result['loader']}, gpus={result['gpus']}, device={result['device']}, status={result['status']}\n\n"
    lines = [
        "| stage | rank rise plan | measured | node plan | measured | GPU/rank plan | torch.cuda peak | GPU device plan "
        "| NVML peak | within |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in compare(result):
        cells = [
            r["stage"],
            r["rank_rise_planned"],
            r["rank_rise_measured"],
            r["node_planned"],
            r["node_measured"],
            r["gpu_planned"],
            r["gpu_measured"],
            r["gpu_device_planned"],
            r["gpu_device_measured"],
            "yes" if r["ok"] else "NO",
        ]
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return head + "\n".join(lines) + "\n"


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
    target = Target("local", result["device"], 0, 0, None, n, 1, n, n if config.get("share_gpus") else 1)
    dist = next(st for st in result["stages"] if st["stage"] == "dist_init")  # the base as this job measured it
    base = RankBase(old["base_rank_gib"] * GIB, old.get("base_private_gib") or dist["rank_pss_anon_peak_max_gib"] * GIB)
    plan = make_plan(settings, result["loader"], role_shapes(settings, {}), target, base)
    return {**result, "plan": {**old, **plan.to_dict()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sweeps", nargs="+", type=Path, help="sweep dirs, or dirs of copied result files (*.json)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--replan", action="store_true", help="recompute each plan with the current formulas")
    args = parser.parse_args()
    text = (
        f"Tolerance: rank rise and node peak within max({HOST_REL_TOL:.0%} of measured, {HOST_ABS_TOL_GIB} GiB); "
        f"GPU within {GPU_REL_TOL:.0%}. GiB throughout.\n\n"
    )
    if args.replan:
        text = "Plans recomputed with the current formulas (--replan). " + text
    for sweep in args.sweeps:
        files = sorted(sweep.glob("**/result.json")) or sorted(f for f in sweep.glob("*.json") if f.stem != "time_to_engine")
        for f in files:
            result = json.loads(f.read_text())
            text += job_table(replan(result) if args.replan else result) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
