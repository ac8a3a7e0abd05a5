"""A preset's first run against its second: the first generates the checkpoints in the job process, just before the
job's baseline; the second finds them on disk. Writing a checkpoint leaves the node's used memory falling for a
minute and more (rlhf_exp/memory/settle.py), so a baseline taken meanwhile puts the first run's node figures low.
Each round uses a fresh cache dir of its own (the scenario does not generate presets beforehand)."""

from __future__ import annotations

import shutil
from dataclasses import replace

from bench import REPO
from bench.jobs import loaders_of, record, run_job, runs_of
from bench.scenario import Context, JobResult
from bench.tools.tables import markdown
from rlhf_exp.memory.kernel import PERCPU_FREE_LISTS
from rlhf_exp.plan.terms import plan_stages

FIRST, SECOND = "first", "second"


def run_jobs(ctx: Context) -> None:
    """--repeat rounds; in each, every loader's first and second run in a fresh cache, the --baseline tree's beside."""
    trees = ((ctx.baseline, "@baseline"),) if ctx.baseline else ()
    for round_number in range(ctx.repeat):
        for run in runs_of(ctx):
            for loader in loaders_of(run, ctx):
                for tree, suffix in (*trees, (None, "")):
                    cache = ctx.work / f"cache-{round_number}-{loader}{suffix.replace('@', '-')}"
                    shutil.rmtree(cache, ignore_errors=True)
                    cached = replace(run, overrides=(*run.overrides, f"model.cache_dir={cache}"))
                    for which in (FIRST, SECOND):
                        record(ctx, run_job(cached, loader, ctx, tree or REPO, f"{loader}-{which}{suffix}"))
                    shutil.rmtree(cache, ignore_errors=True)  # a 13B pair is 36.6 GiB: one round's on disk at a time


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else _gib(a - b)


def _pairs(ctx: Context) -> list[tuple[JobResult, JobResult]]:
    """(first, second) of each round, in order."""
    jobs = [j for j in ctx.jobs if j.result]
    firsts = [j for j in jobs if f"-{FIRST}" in j.label]
    out = []
    for first in firsts:
        label = first.label.replace(f"-{FIRST}", f"-{SECOND}")
        later = [j for j in jobs[jobs.index(first) + 1 :] if j.label == label]
        if later:
            out.append((first, later[0]))
    return out


def table(ctx: Context) -> str:
    parts = []
    for first, second in _pairs(ctx):
        f, s = first.result or {}, second.result or {}
        planned = {st.stage: st.node_peak_gib for st in plan_stages(s.get("plan"))}
        seconds = {row["stage"]: row for row in s.get("stages", [])}
        rows = []
        for row in f.get("stages", []):
            other = seconds.get(row["stage"], {})
            node_first, node_second = row.get("node_peak_gib"), other.get("node_peak_gib")
            net_first, net_second = row.get("node_net_peak_gib"), other.get("node_net_peak_gib")
            rows.append(
                {
                    "stage": row["stage"],
                    "node plan": _gib(planned.get(row["stage"])),
                    f"node {FIRST}": _gib(node_first),
                    f"node {SECOND}": _gib(node_second),
                    f"{FIRST} - {SECOND}": _difference(node_first, node_second),
                    f"net of the lists, {FIRST} - {SECOND}": _difference(net_first, net_second),
                    f"per-CPU lists moved, {FIRST}": (row.get("meminfo_moved_gib") or {}).get(PERCPU_FREE_LISTS, 0.0),
                    f"{SECOND}": (other.get("meminfo_moved_gib") or {}).get(PERCPU_FREE_LISTS, 0.0),
                }
            )
        lists = [(r.get("baseline") or {}).get("meminfo_gib", {}).get(PERCPU_FREE_LISTS) for r in (f, s)]
        head = (
            f"{first.label} / {second.label}: {f.get('status')} / {s.get('status')}, checkpoints {f.get('checkpoint_gib')} "
            f"GiB; per-CPU free lists at the baseline {_gib(lists[0])} / {_gib(lists[1])} GiB"
        )
        parts.append(markdown(rows, head))
    unpaired = [j for j in ctx.jobs if not j.result]
    parts += [f"{j.run}/{j.label}: no result.json ({j.job_dir})\n" for j in unpaired]
    return "\n".join(parts)
