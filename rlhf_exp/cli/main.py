"""`python -m rlhf_exp`: the job (a Hydra app), or the `plan` and `report` subcommands, or --help."""

from __future__ import annotations

import sys

from rlhf_exp.cli.argv_checks import check_group_choices, check_output_dir, check_override_keys
from rlhf_exp.job.interrupt import INTERRUPTED_EXIT, stop_on_sigterm


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["plan"]:
        from rlhf_exp.cli.plan_command import main as plan_main

        sys.exit(plan_main(argv[1:]))
    if argv[:1] == ["report"]:
        from rlhf_exp.report.html import main as report_main

        sys.exit(report_main(argv[1:]))
    if any(a in ("--help", "-h") for a in argv):
        from rlhf_exp.cli.help import help_text

        print(help_text())
        return
    bad = check_group_choices(argv) or check_override_keys(argv) or check_output_dir(argv)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        sys.exit(2)
    from rlhf_exp.cli.hydra_app import hydra_app

    stop_on_sigterm()
    try:
        hydra_app()
    except KeyboardInterrupt as err:  # outside a job's ranks (preparing, between jobs): nothing half-recorded
        print(f"interrupted ({err or 'SIGINT'})", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    from rlhf_exp.report.sweep_callback import SWEEP_OUTCOME

    if SWEEP_OUTCOME.get("all_completed") is False:
        sys.exit(1)  # a sweep in which a job failed (each is recorded; the table says which)
