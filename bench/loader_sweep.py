"""Benchmark: one sweep of the real app over loaders; prints and writes a table of host figures per loader.

    python bench/loader_sweep.py --gpus 4 --model llama-350m --zero stage3 --name cpu-4rank
    python bench/loader_sweep.py --gpus 8 --model llama-1.3b --device cuda --share-gpus --name h200-8rank

Runs `python -m rlhf_exp -m loader=... gpus=G` (the product itself), copies every job's result.json
to bench/results/<name>/, and appends the table to bench/RESULTS.md. Figures are the app's own
(kernel and framework readings); this script only arranges them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCH = Path(__file__).resolve().parent
ROLES = ("actor", "ref", "critic", "reward")


def run_sweep(args: argparse.Namespace, sweep_dir: Path) -> list[dict]:
    cmd = [
        sys.executable,
        "-m",
        "rlhf_exp",
        "-m",
        f"hydra.sweep.dir={sweep_dir}",
        f"loader={args.loaders}",
        f"gpus={args.gpus}",
        f"model={args.model}",
        f"zero={args.zero}",
        f"device={args.device}",
        f"share_gpus={str(args.share_gpus).lower()}",
        *args.overrides,
    ]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=BENCH.parent, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    files = sorted(sweep_dir.glob("*/result.json"), key=lambda p: int(p.parent.name.split("_")[0]))
    return [json.loads(f.read_text()) for f in files]


def row_of(result: dict) -> dict:
    stages = {s["stage"]: s for s in result["stages"]}
    ckpt = result["checkpoint_gib"]["actor"]
    actor = stages.get("actor.load", {})
    gpu_peaks = [s.get("gpu_cuda_peak_allocated_gib") for s in result["stages"] if s.get("gpu_cuda_peak_allocated_gib")]
    return {
        "loader": result["loader"],
        "status": result["status"],
        "node_peak_gib": result.get("node_peak_gib"),
        "actor_load_rise_gib": actor.get("node_rise_gib"),
        "actor_load_rise_x_ckpt": round(actor["node_rise_gib"] / ckpt, 2) if actor.get("node_rise_gib") is not None else None,
        "actor_load_pss_anon_rank_max_gib": actor.get("rank_pss_anon_peak_max_gib"),
        **{
            f"{r}_load_s": round(stages[f"{r}.load"]["duration_s"], 2)
            if f"{r}.load" in stages and stages[f"{r}.load"]["duration_s"]
            else None
            for r in ROLES
        },
        "gpu_peak_alloc_gib": max(gpu_peaks) if gpu_peaks else None,
        "wall_s": result.get("wall_s"),
    }


def markdown(rows: list[dict], header: str) -> str:
    keys = list(rows[0])
    lines = [header, "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join("-" if r[k] is None else str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--model", default="llama-350m")
    parser.add_argument("--zero", default="stage3")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--share-gpus", action="store_true")
    parser.add_argument("--loaders", default="naive,staggered,low_mem,rank0_broadcast,zero3_init,direct")
    parser.add_argument("--name", default="cpu-4rank")
    parser.add_argument("--sweep-dir", type=Path, default=None)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    args = parser.parse_args()

    sweep_dir = args.sweep_dir or Path("/tmp") / f"rlhf_exp_bench_{args.name}"
    shutil.rmtree(sweep_dir, ignore_errors=True)
    results = run_sweep(args, sweep_dir)
    out = BENCH / "results" / args.name
    out.mkdir(parents=True, exist_ok=True)
    for r in results:
        (out / f"{r['loader']}.json").write_text(json.dumps(r, indent=1))
    rows = [row_of(r) for r in results]

    table = Table(title=f"{args.name}: gpus={args.gpus} model={args.model} zero={args.zero}")
    for key in rows[0]:
        table.add_column(key, justify="right")
    for r in rows:
        table.add_row(*("-" if v is None else str(v) for v in r.values()))
    Console(width=250).print(table)
    ckpt = results[0]["checkpoint_gib"]
    header = (
        f"## {args.name}: gpus={args.gpus}, model={args.model} (actor {ckpt['actor']} GiB, critic {ckpt['critic']} GiB), "
        f"zero={args.zero}, device={results[0]['device']}, overrides={args.overrides or 'none'}"
    )
    with open(BENCH / "RESULTS.md", "a") as fh:
        fh.write("\n" + markdown(rows, header))


if __name__ == "__main__":
    main()
