"""What made each stage's GPU peak (profile_gpu_memory=true): rank 0's live allocations at the peak, by the line that
allocated them, beside the plan's GPU figure for a rank. Reads profiles/gpu_memory_rank0.jsonl of each job."""

from __future__ import annotations

import json
import shutil

from bench.scenario import Context
from bench.tools.tables import markdown
from rlhf_exp.jobdir import JobDir

SHOWN_GIB = 0.02  # sites below this are left out of the table (the jsonl kept beside it has them all)


def table(ctx: Context) -> str:
    parts, without = [], []
    for job in ctx.jobs:
        history = JobDir(job.job_dir).gpu_memory_file(0)
        if not history.exists():
            status = (job.result or {}).get("status", "no result")
            without.append({"job": f"{job.run}/{job.label}", "status": status, "GPU history": "none (CPU ranks)"})
            continue
        kept = ctx.out / f"{job.run}-{job.label.replace(':', '_')}-gpu-memory.jsonl"
        shutil.copyfile(history, kept)
        plan = {s["stage"]: s.get("gpu_rank_gib") for s in ((job.result or {}).get("plan") or {}).get("stages", [])}
        pinned = {s["stage"]: _pinned(s) for s in (job.result or {}).get("stages", [])}
        rows = []
        for line in history.read_text().splitlines():
            stage = json.loads(line)
            if "error" in stage:
                rows.append({"stage": stage["stage"], "site": f"not recorded: {stage['error']}"})
                continue
            name = stage["stage"]
            rows.append(
                {
                    "stage": name,
                    "site": "peak allocated",
                    "GiB": stage["peak_allocated_gib"],
                    "plan GiB": plan.get(name),
                    "pinned host pool GiB (blocks)": pinned.get(name),
                }
            )
            rows += [{"stage": "", "site": site, "GiB": gib} for site, gib in stage["sites"] if gib >= SHOWN_GIB]
        status = (job.result or {}).get("status", "no result")
        parts.append(markdown(rows, f"{job.run}/{job.label} ({status}); every site: {kept.name}"))
    return "\n".join(parts + ([markdown(without)] if without else []))


def _pinned(stage: dict) -> str | None:
    """The largest rank's pinned host pool at the stage's end, and its block count (bytes / blocks: their size)."""
    ranks = [r for r in stage.get("per_rank", []) if r.get("cuda_pinned_gib") is not None]
    if not ranks:
        return None
    top = max(ranks, key=lambda r: r["cuda_pinned_gib"])
    return f"{top['cuda_pinned_gib']:.3f} ({top.get('cuda_pinned_blocks', '-')})"
