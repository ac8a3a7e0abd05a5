"""At the end of every multirun (local or SLURM, resumed, with skipped or failed jobs): one comparison table on
the console and report.html beside multirun.yaml. Configured in the app's Hydra config (hydra.callbacks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from rlhf_exp.report.comparison import COLUMNS, comparison_row, fmt, swept_keys
from rlhf_exp.report.table import CONSOLE_WIDTH
from rlhf_exp.report.tracking import sync_hint


def comparison_table(results: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title)
    for key, header in COLUMNS:
        table.add_column(header, justify="left" if key in ("job", "loader", "status", "peak_stage", "failed_at") else "right")
    keys = swept_keys(results)
    for result in results:
        row = comparison_row(result, keys)
        style = None if row["status"] == "completed" else "red"
        table.add_row(*(fmt(row[key]) for key, _ in COLUMNS), style=style)
    return table


# set at the end of a multirun in this process: whether every job completed (`python -m rlhf_exp -m` exits 1 if not)
SWEEP_OUTCOME: dict[str, bool] = {}


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from rlhf_exp.report.html import NoResults, load_results, write_report

        sweep_dir = Path(str(config.hydra.sweep.dir))
        try:
            results = load_results(sweep_dir)
        except NoResults:  # no job wrote a result (every one refused before its dir was made)
            SWEEP_OUTCOME["all_completed"] = False
            return
        SWEEP_OUTCOME["all_completed"] = all(r.get("status") == "completed" for r in results)
        console = Console(width=CONSOLE_WIDTH)
        console.print(comparison_table(results, f"sweep {sweep_dir}"))
        console.print(f"report: {write_report(sweep_dir)}")
        if hint := sync_hint(sweep_dir, sweep=True):
            console.print(hint)
