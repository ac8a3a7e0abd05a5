"""The per-stage table printed at the end of a job (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

COLUMNS: list[tuple[str, str]] = [
    ("stage", "stage"),
    ("duration_s", "time s"),
    ("node_peak_gib", "node Δ GiB"),
    ("node_rise_gib", "stage rise"),
    ("cgroup_peak_gib", "cgroup Δ GiB"),
    ("rank_peak_rss_max_gib", "rank VmHWM max"),
    ("rank_pss_anon_peak_max_gib", "rank Pss_Anon max"),
    ("pss_anon_sum_peak_gib", "Σ Pss_Anon"),
    ("rank_uss_end_max_gib", "rank USS"),
    ("gpu_cuda_peak_allocated_gib", "GPU peak alloc"),
    ("gpu_cuda_reserved_gib", "GPU reserved"),
    ("gpu_nvml_used_gib", "NVML used"),
]


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def stage_table(result: dict[str, Any]) -> Table:
    stages = result.get("stages", [])
    columns = [(k, h) for k, h in COLUMNS if any(row.get(k) is not None for row in stages) or k == "stage"]
    title = (
        f"{result.get('loader')} · gpus={result.get('gpus')} · {result.get('device')} · "
        f"{result.get('status')} · ckpt actor {result.get('checkpoint_gib', {}).get('actor', '?')} GiB"
    )
    table = Table(title=title, caption="host figures: node Δ = peak (MemTotal−MemAvailable) above baseline")
    for key, header in columns:
        table.add_column(header, justify="left" if key == "stage" else "right")
    for row in stages:
        style = "red" if row.get("status") != "ok" else None
        table.add_row(*(_fmt(row.get(k)) for k, _ in columns), style=style)
    return table


def print_result(result: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(width=200)
    console.print(stage_table(result))
    if result.get("status") != "completed":
        f = result.get("failure") or {}
        reason = escape(str(f.get("reason")))  # errors carry [brackets] rich would read as markup
        console.print(f"[red]FAILED[/red] at stage {f.get('stage')} on rank {f.get('rank')}: {reason}")
    console.print(f"result: {result.get('result_file')}")
