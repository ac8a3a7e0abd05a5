"""At the end of every multirun (local or SLURM, resumed, with skipped or failed jobs): one comparison table on
the console and report.html beside multirun.yaml. Configured in the app's Hydra config (hydra.callbacks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from rlhf_exp.report.comparison import COLUMNS, CONSOLE_KEYS, comparison_row, fmt, job_number, swept_keys
from rlhf_exp.report.table import CONSOLE_WIDTH
from rlhf_exp.report.tracking import sync_hint


def comparison_table(results: list[dict[str, Any]], title: str) -> Table:
    """A row per job, fitting CONSOLE_WIDTH: the job's number in the sweep, its swept keys and figures; a legend."""
    emulated = any(r.get("emulation") for r in results)  # the caps' column only where a job ran under them
    columns = [c for c in COLUMNS if c[0] in CONSOLE_KEYS or (c[0] == "emulated" and emulated)]
    legend = "\n".join(f"{header}: {meaning}" for _, header, meaning in columns if meaning)
    table = Table(title=title, caption=legend, caption_justify="left")
    for key, header, _ in columns:
        table.add_column(header, justify="left" if key in ("job", "config", "zero", "status", "peak_stage") else "right")
    keys = swept_keys(results)
    for result in results:
        row = {**comparison_row(result, keys), "job": job_number(result)}
        failed = row["status"] != "completed"
        status = f"{row['status']} at {row['failed_at']}" if failed and row["failed_at"] else row["status"]
        table.add_row(*(fmt(status if k == "status" else row[k]) for k, _, _ in columns), style="red" if failed else None)
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
