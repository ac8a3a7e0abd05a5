"""The app's jobs a scenario declares, run one at a time (each has the machine to itself), results collected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench import GIB, REPO
from bench.scenario import Context, JobResult, Run
from rlhf_exp.memory.settle import settle_node

# loader:variant: the loader with these overrides, in the same run (a before/after)
VARIANTS = {
    "library": ["loader.fast_read=false"],  # from_pretrained: direct's path before fast_read, zero3_init's before its read
    "reread": ["loader.copy_twin=false"],  # ref/reward read their checkpoint again instead of copying on the GPU
}
EVERY_JOB = ["plan.fit_check=false"]  # the bench measures what happens, fitting or not (the watchdog still guards)


def checkpoint_files(overrides: list[str]) -> list[Path]:
    """The job's weight files, generated and checked now as the job would (so generation is never timed as loading)."""
    from rlhf_exp.checkpoints.files import weight_files
    from rlhf_exp.config.compose import compose_config
    from rlhf_exp.config.schema import validate
    from rlhf_exp.job.prepare import checkpoint_dirs

    settings = validate(compose_config([o for o in overrides if not o.startswith("loader.")]))
    return [f for ckpt in checkpoint_dirs(settings, generate=True).values() if ckpt for f in weight_files(ckpt)]


def generate(models: tuple[str, ...]) -> None:
    for model in dict.fromkeys(models):
        start = time.perf_counter()
        files = checkpoint_files([f"model={model}"])
        gib = sum(f.stat().st_size for f in files) / GIB
        print(f"checkpoints {model}: {gib:.1f} GiB ready in {time.perf_counter() - start:.0f} s", flush=True)


def loaders_of(run: Run, ctx: Context) -> tuple[str, ...]:
    loaders = (run.dry_loaders or run.loaders[:1]) if ctx.dry else run.loaders
    return tuple(name for name in loaders if not ctx.only or any(picks(entry, name) for entry in ctx.only))


def picks(entry: str, name: str) -> bool:
    """--only's entries: `direct` is the loader and its variants, `direct:reread` one variant, `direct:` the plain one."""
    return name == entry.rstrip(":") or (":" not in entry and name.partition(":")[0] == entry)


def job_overrides(run: Run, name: str, ctx: Context) -> list[str]:
    """The app's overrides for one job of `run` with loader[:variant] `name` (its plan's too)."""
    loader, _, variant = name.partition(":")
    overrides = [o.format(**ctx.sizes) for o in run.overrides]
    ppo = [] if any(o.startswith("ppo.steps=") for o in overrides) else ["ppo.steps=0"]  # PPO is not the engine's time
    return [f"loader={loader}", *EVERY_JOB, *ppo, *overrides, *VARIANTS.get(variant, [])]


def job_command(run: Run, name: str, ctx: Context, job_dir: Path) -> list[str]:
    return [sys.executable, "-m", "rlhf_exp", f"hydra.run.dir={job_dir}", *job_overrides(run, name, ctx)]


def run_job(run: Run, name: str, ctx: Context, tree: Path, label: str) -> JobResult:
    if not ctx.dry:  # a tiny CPU rehearsal's baseline is not what it checks; 10 s a job would add up in the suite
        print(settle_node().describe(), flush=True)
    job_dir = ctx.work / run.name / f"{len(ctx.jobs)}_{label.replace(':', '_').replace('@', '_')}"
    cmd = job_command(run, name, ctx, job_dir)
    print("$ python", " ".join(cmd[1:]), flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)}
    subprocess.run(cmd, cwd=tree, env=env)
    result_file = job_dir / "result.json"
    result = json.loads(result_file.read_text()) if result_file.exists() else None
    return JobResult(run.name, label, result, job_dir, ["python", *cmd[1:]])


def runs_of(ctx: Context) -> tuple[Run, ...]:
    """--dry-run: the smallest configuration, the first run (its first loader); the rest share its code path and
    their configs are validated by tests/unit/test_bench_scenarios.py. --runs: the runs named."""
    runs = tuple(r for r in ctx.scenario.runs if not ctx.runs or r.name in ctx.runs)
    return runs[:1] if ctx.dry else runs


def models_of(ctx: Context) -> tuple[str, ...]:
    """The presets to generate before any timed job: those the runs to be made name, else the scenario's."""
    if not ctx.scenario.pregenerate:
        return ()
    if not ctx.scenario.runs:
        return ctx.scenario.models(ctx.sizes)
    overrides = [o for run in runs_of(ctx) for o in run.overrides]
    return tuple(ctx.sizes[k] for k in ("model", "small") if k in ctx.sizes and any(f"{{{k}}}" in o for o in overrides))


def record(ctx: Context, job: JobResult) -> None:
    """A finished job into the context and its result.json into the results folder at once (a lease may end)."""
    ctx.jobs.append(job)
    keep_results(ctx)


def run_all(ctx: Context) -> None:
    """Every run's jobs, --repeat times in turn (a machine's noise), each beside the --baseline tree's same job."""
    for _ in range(ctx.repeat):
        for run in runs_of(ctx):
            for name in loaders_of(run, ctx):
                if ctx.baseline:
                    record(ctx, run_job(run, name, ctx, ctx.baseline, f"{name}@baseline"))
                record(ctx, run_job(run, name, ctx, REPO, name))


def keep_results(ctx: Context) -> None:
    """Each job's result.json into <out>/<run>/<label>[.k].json (k for repeats)."""
    seen: dict[tuple[str, str], int] = {}
    for job in ctx.jobs:
        if job.result is None:
            continue
        key = (job.run, job.label)
        seen[key] = seen.get(key, 0) + 1
        suffix = f".{seen[key]}" if seen[key] > 1 else ""
        folder = ctx.out / job.run
        folder.mkdir(parents=True, exist_ok=True)
        name = job.label.replace(":", "_").replace("@", "_")
        (folder / f"{name}{suffix}.json").write_text(json.dumps({**job.result, "bench_command": job.command}, indent=1))
