"""python -m bench: run named scenarios (one command on a GPU machine or, --dry-run, on CPU), and keep their results.

python -m bench list
python -m bench run seed time-to-engine            # in turn; results/<scenario>-<date>/, a table each
python -m bench run all --dry-run                  # every scenario's smallest configuration on CPU
python -m bench run seed --detach                  # on a lent GPU machine: outlives the call (then `follow`)
python -m bench follow --wait 540 --pack $OUT      # wait for the detached run, print its end, pack its results
python -m bench unpack bench_results.tar.gz        # here: the packed folders into results/, RESULTS.md rebuilt
python -m bench summarize                          # RESULTS.md from results/
python -m bench plan-check DIR... [--replan]       # plan vs measured for any job dirs or result files
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from bench import device
from bench.scenario import Scenario


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the scenarios")
    run = sub.add_parser("run", help="run scenarios in turn")
    run.add_argument("scenarios", nargs="+", help="scenario names, or all")
    run.add_argument("--dry-run", action="store_true", help="each scenario's smallest configuration, on CPU")
    run.add_argument("--results", type=Path, help="the results root (default: bench/results; a dry run: a temp dir)")
    run.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="replace one of the scenario's sizes, e.g. --size model=llama-350m --size device=cpu",
    )
    run.add_argument(
        "--only",
        default="",
        help="comma-separated loaders: run only these of each scenario's (`direct`: with its variants, "
        "`direct:reread`: that variant, `direct:`: the plain loader)",
    )
    run.add_argument("--runs", default="", help="comma-separated run names: only these of each scenario's runs")
    run.add_argument(
        "--repeat", type=int, help="run every job this many times, in turn (a machine's noise; default: the scenario's)"
    )
    run.add_argument(
        "--baseline", type=Path, help="an older source tree: each job also runs from it, alternating (where it compares)"
    )
    run.add_argument("--ship", action="store_true", help="time-to-engine: write loader=auto's order (measured_speed.json)")
    run.add_argument("--detach", action="store_true", help="run in a new session that outlives the call (a lent machine)")
    run.add_argument("--pack", type=Path, help="tar the results into this folder at the end ($OUT on a lent machine)")
    follow = sub.add_parser("follow", help="wait for a detached run, print its console's end, pack its results")
    follow.add_argument("--wait", type=float, default=0, help="seconds to wait at most")
    follow.add_argument("--pack", type=Path)
    sub.add_parser("stop", help="stop a detached run")
    unpack = sub.add_parser("unpack", help="a packed tarball's folders into bench/results, RESULTS.md rebuilt")
    unpack.add_argument("tarball", type=Path)
    sub.add_parser("summarize", help="rebuild RESULTS.md")
    check = sub.add_parser("plan-check", help="plan vs measured for job dirs or folders of result files")
    check.add_argument("folders", nargs="+", type=Path)
    check.add_argument("--replan", action="store_true", help="recompute each plan with the current formulas")
    return parser.parse_args(argv)


def refused(message: str) -> int:
    """One error line on stderr, exit status 2 (as argparse gives a bad argument)."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def option_error(args: argparse.Namespace, names: list[str], scenarios: list[Scenario]) -> str | None:
    """--runs, --size and --only checked against the named scenarios (a typo would otherwise run a scenario
    unchanged), and a dry run's --size kept off the models it would generate here."""
    from bench.jobs import picks

    run_names = sorted({run.name for s in scenarios for run in s.runs})
    for name in (r for r in args.runs.split(",") if r):
        if name not in run_names:
            return f"--runs {name!r} is no run of {', '.join(names)}; valid: {', '.join(run_names)}"
    keys = sorted({key for s in scenarios for key in (*s.full, *s.dry)})
    for kv in args.size:
        key, eq, _ = kv.partition("=")
        if not eq or key not in keys:
            return f"--size {kv}: {'no KEY=VALUE' if not eq else 'no size of these scenarios'}; valid keys: {', '.join(keys)}"
    loaders = sorted({name for s in scenarios for run in s.runs for name in (*run.loaders, *(run.dry_loaders or ()))})
    for entry in (e for e in args.only.split(",") if e):
        if loaders and not any(picks(entry, name) for name in loaders):
            return f"--only {entry}: no loader of these scenarios; valid: {', '.join(loaders)}"
    models = [kv for kv in args.size if kv.partition("=")[0] in ("model", "small")]
    if args.dry_run and models:  # it would generate that model's checkpoints here, tens of GB at 7B and 13B
        return (f"--size {models[0]}: a dry run rehearses each scenario's smallest models on CPU; valid: "
                "--size without model= or small=, or no --dry-run")  # fmt: skip
    return None


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.command == "follow":
        return device.follow(args.wait, args.pack)
    if args.command == "stop":
        device.stop()
        return 0
    if args.command in ("unpack", "summarize"):
        from bench.tools import summarize

        if args.command == "unpack":
            if not args.tarball.is_file():
                return refused(f"unpack {args.tarball}: no such file; valid: a bench_results.tar.gz fetched from $OUT")
            summarize.unpack(args.tarball)
        summarize.write_results_md()
        return 0
    device.ensure_libraries(argv)
    device.machine_environment()
    from bench.runner import run_scenarios
    from bench.scenarios import SCENARIOS

    if args.command == "list":
        for s in SCENARIOS.values():
            print(f"{s.name:18} {s.summary}")
        return 0
    if args.command == "plan-check":
        from bench.tools.plan_check import check

        missing = [str(f) for f in args.folders if not f.is_dir()]
        if missing:
            return refused(f"plan-check {missing[0]}: no such folder; valid: a job dir, a sweep dir or a results folder")
        print(check(args.folders, args.replan))
        return 0
    names = list(SCENARIOS) if args.scenarios == ["all"] else args.scenarios
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        return refused(f"scenario {unknown[0]!r} unknown; valid: all, {', '.join(SCENARIOS)}")
    error = option_error(args, names, [SCENARIOS[n] for n in names])
    if error:
        return refused(error)
    if args.detach:
        device.detach(
            [a for a in argv if a != "--detach"] + ([] if args.results else ["--results", str(device.KEEP / "results")])
        )
        return 0
    command = "python -m bench " + shlex.join(argv)
    return run_scenarios([SCENARIOS[n] for n in names], args, command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
