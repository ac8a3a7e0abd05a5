"""Run scenarios in turn: checkpoints generated first, then each scenario's jobs and its table, one results folder
each. A scenario that fails is reported and the next one runs (a lease's later steps are not lost to an early one)."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import traceback
from pathlib import Path

from bench import RESULTS, device, jobs, provenance
from bench.scenario import Context, Scenario
from rlhf_exp.jobdir import JOB_LOG


def results_root(args: argparse.Namespace) -> Path:
    if args.results:
        return args.results
    return Path(tempfile.mkdtemp(prefix="bench_dry_")) if args.dry_run else RESULTS


def run_one(scenario: Scenario, args: argparse.Namespace, root: Path, command: str) -> Path:
    sizes = {**(scenario.dry if args.dry_run else scenario.full), **dict(kv.split("=", 1) for kv in args.size)}
    out = provenance.results_folder(root, scenario.name, args.dry_run)
    ctx = Context(
        scenario=scenario,
        sizes=sizes,
        dry=args.dry_run,
        out=out,
        work=Path(tempfile.mkdtemp(prefix=f"bench_{scenario.name}_")),
        repeat=1 if args.dry_run else args.repeat or scenario.repeat,
        baseline=args.baseline.resolve() if args.baseline and scenario.compares else None,
        ship=args.ship,
        only=tuple(x for x in args.only.split(",") if x),
        runs=tuple(x for x in args.runs.split(",") if x),
    )
    print(f"=== {scenario.name} ({'dry run' if ctx.dry else 'full'}): {scenario.summary}", flush=True)
    provenance.write(out, scenario.name, command, ctx.dry, {"sizes": dict(sizes), "summary": scenario.summary})
    jobs.generate(jobs.models_of(ctx))
    if scenario.prepare:
        scenario.prepare(ctx)
    (scenario.run_jobs or jobs.run_all)(ctx)
    text = scenario.table(ctx)
    (out / provenance.TABLE).write_text(f"`{command}`\n\n{text}")
    print(text, flush=True)
    print(f"results: {out}", flush=True)
    drop_job_folders(ctx)
    return out


def drop_job_folders(ctx: Context) -> None:
    """The job folders (logs, samples, wandb runs) go once every job's result.json is in the results folder; a job
    without one keeps them all, named on the console, for its log."""
    missing = [j for j in ctx.jobs if j.result is None]
    if missing:
        print(f"job folders kept ({len(missing)} without result.json): {ctx.work}", flush=True)
        for job in missing:  # what ended each one: its log's last lines
            log = job.job_dir / JOB_LOG
            tail = log.read_text().splitlines()[-15:] if log.exists() else [f"(no {JOB_LOG})"]
            print(f"--- {job.job_dir}", *tail, sep="\n", flush=True)
    else:
        shutil.rmtree(ctx.work, ignore_errors=True)


def run_scenarios(scenarios: list[Scenario], args: argparse.Namespace, command: str) -> int:
    root = results_root(args)
    failed = []
    for scenario in scenarios:
        try:
            run_one(scenario, args, root, command)
        except Exception:  # noqa: BLE001 - reported, and the lease's next scenario still runs
            traceback.print_exc()
            failed.append(scenario.name)
        if args.pack:
            device.pack_results(root, args.pack)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0
