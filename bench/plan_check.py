"""Planned against measured for every job of one or more sweeps: a markdown table per job.

    python bench/plan_check.py <sweep dir> [...] [--out FILE]

Figures: rlhf_exp.plan_compare (the plan each job stored beside its measurement, and the job's own
kernel/torch.cuda readings). The tolerance line is the one the CPU tests assert.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlhf_exp.plan_compare import ABS_TOL_GIB, REL_TOL, compare


def job_table(result: dict) -> str:
    head = f"### {result['loader']}, gpus={result['gpus']}, device={result['device']}, status={result['status']}\n\n"
    lines = [
        "| stage | rank rise plan | measured | node plan | measured | GPU/rank plan | measured | within |",
        "|---|---|---|---|---|---|---|---|",
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
            "yes" if r["ok"] else "NO",
        ]
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sweeps", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = f"Tolerance (rank rise): max({REL_TOL:.0%} of plan, {ABS_TOL_GIB} GiB). GiB throughout.\n\n"
    for sweep in args.sweeps:
        for f in sorted(sweep.glob("**/result.json")):
            text += job_table(json.loads(f.read_text())) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
