"""The per-stage table printed at the end of a job (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rlhf_exp.jobdir import Failure
from rlhf_exp.report.comparison import emulation_label
from rlhf_exp.report.record import Column, stage_columns

COLUMNS = [Column("stage", "stage", ""), *stage_columns(table=True)]
CONSOLE_WIDTH = 120  # every console table fits it


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def stage_table(result: dict[str, Any]) -> Table:
    stages = result.get("stages", [])
    columns = [c for c in COLUMNS if any(row.get(c.key) is not None for row in stages) or c.key == "stage"]
    title = (
        f"{result.get('loader')} · gpus={result.get('gpus')} · {result.get('device')} · "
        f"{result.get('status')} · ckpt actor {result.get('checkpoint_gib', {}).get('actor', '?')} GiB"
    )
    if emulated := emulation_label(result):
        title += f" · emulated {emulated}"
    legend = "\n".join(f"{c.label}: {c.meaning}" for c in columns if c.meaning)
    table = Table(title=title, caption=f"memory in GiB, time in s\n{legend}", caption_justify="left")
    for column in columns:  # units in the legend: the table fits CONSOLE_WIDTH
        stage = column.key == "stage"
        table.add_column(column.label, justify="left" if stage else "right", no_wrap=stage)
    for row in stages:
        style = "red" if row.get("status") != "ok" else None
        table.add_row(*(_fmt(row.get(c.key)) for c in columns), style=style)
    return table


def print_result(result: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(width=CONSOLE_WIDTH)
    table = stage_table(result)
    if result.get("stages"):
        console.print(table)
    else:  # no stage began (a failure at launch): the title alone, not squeezed into an empty table's width
        console.print(table.title)
    if result.get("status") != "completed":
        f = Failure.from_dict(result.get("failure")) or Failure(stage=None, rank=None, reason="unknown")
        reason = escape(f.reason)  # errors carry [brackets] rich would read as markup
        who = f"on rank {f.rank}" if f.rank is not None else f"by the {f.process}" if f.process else "with no rank named"
        console.print(f"[red]FAILED[/red] at stage {f.stage} {who}: {reason}")
    console.print(f"result: {result.get('result_file')}")
