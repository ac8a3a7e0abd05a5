"""One job's stages: time, host and GPU figures per stage (the table a single-configuration scenario prints)."""

from __future__ import annotations

import pstats
from pathlib import Path

from bench.scenario import Context
from bench.tools.tables import markdown
from rlhf_exp.jobdir import JobDir

KEYS = (
    "duration_s",
    "rank_peak_rss_max_gib",
    "node_peak_gib",
    "gpu_cuda_peak_allocated_gib",
    "gpu_nvml_used_gib",
)


def stage_rows(result: dict) -> list[dict]:
    rows = []
    for s in result["stages"]:
        rows.append({"stage": s["stage"], **{k: round(s[k], 2) if isinstance(s.get(k), float) else s.get(k) for k in KEYS}})
    return rows


def profile_text(job_dir: Path, out: Path) -> str | None:
    """A rank's cProfile of its engine build (profile=true), the top functions by cumulative time, kept as text."""
    prof = JobDir(job_dir).profile_file(0)
    if not prof.exists():
        return None
    with open(out, "w") as fh:
        stats = pstats.Stats(str(prof), stream=fh)
        stats.sort_stats("cumulative").print_stats(50)
        stats.sort_stats("tottime").print_stats(25)
    return out.name


def table(ctx: Context) -> str:
    parts = []
    for job in ctx.jobs:
        if not job.result:
            parts.append(f"{job.run}/{job.label}: no result.json ({job.job_dir})\n")
            continue
        r = job.result
        failure = r.get("failure") or {}
        head = (
            f"{job.run}/{job.label}: {r['status']}{' at ' + str(failure.get('stage')) if failure else ''}, "
            f"wall {r.get('wall_s')} s, node peak {r.get('node_peak_gib')} GiB, checkpoints {r.get('checkpoint_gib')} GiB"
        )
        profile = profile_text(job.job_dir, ctx.out / f"{job.run}-{job.label.replace(':', '_')}-profile.txt")
        parts.append(markdown(stage_rows(r), head) + (f"\nprofile of rank 0: {profile}\n" if profile else ""))
    return "\n".join(parts)
