"""The HTML report of a sweep or a single run: `python -m rlhf_exp report <sweep or run dir> [-o report.html]`.

One page: the comparison table; comparison figures across jobs (node peak and load time vs GPUs per loader,
per-stage stacked host and GPU bars, one distinct colour per stage, no panel without data); then per job its
memory timeline (node, each rank's Pss_Anon and RSS, GPU per rank; stage bands; the watchdog limit and each
stage's planned node peak as lines; the failure marked) and plan vs measured per stage. Figures are
matplotlib PNGs embedded in the page, no script (the browser test adds its own probe to a copy).
"""

from __future__ import annotations

import argparse
import base64
import colorsys
import html
import io
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rlhf_exp.jobdir import RESULT, Failure  # noqa: E402
from rlhf_exp.plan.compare import compare  # noqa: E402
from rlhf_exp.plan.terms import COMPARED  # noqa: E402
from rlhf_exp.report.comparison import COLUMNS, comparison_row, config_label, fmt, swept_keys  # noqa: E402
from rlhf_exp.report.record import COLUMN  # noqa: E402
from rlhf_exp.report.summary import load_time_s  # noqa: E402
from rlhf_exp.report.timeline import Timeline, build_timeline  # noqa: E402

REPORT = "report.html"


class NoResults(ValueError):
    """No result to report, or one that cannot be read: one line, naming the path."""


def load_results(path: Path) -> list[dict[str, Any]]:
    """Every job's result.json under a sweep dir, or the one of a run dir."""
    files = [path / RESULT] if (path / RESULT).exists() else sorted(path.glob(f"*/{RESULT}"))
    results = []
    for f in files:
        try:
            results.append(json.loads(f.read_text()))
        except (ValueError, OSError) as err:  # truncated by a killed writer, or unreadable
            raise NoResults(f"{f} is not a readable result ({err})") from None
    if not results:
        raise NoResults(f"no {RESULT} in or under {path}")
    return sorted(results, key=lambda r: (str(r.get("loader")), r.get("gpus") or 0, str(r.get("job_dir"))))


def stage_colors(stages: list[str]) -> dict[str, tuple[float, float, float]]:
    """One distinct colour per stage: tab20 up to 20 stages, evenly spaced hues beyond."""
    if len(stages) <= 20:
        cmap = plt.get_cmap("tab20")
        return {s: cmap(i)[:3] for i, s in enumerate(stages)}
    return {s: colorsys.hsv_to_rgb(i / len(stages), 0.65, 0.85) for i, s in enumerate(stages)}


def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def by_config(results: list[dict[str, Any]], but: str) -> dict[str, list[dict[str, Any]]]:
    """The jobs grouped by every swept key but `but`: one series per distinct configuration, never two merged."""
    keys = [k for k in swept_keys(results) if k != but]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[config_label(r, keys) if keys else str(r.get("loader"))].append(r)
    return dict(groups)


def _lines_vs_gpus(results: list[dict[str, Any]], value: Callable[[dict], float], ylabel: str, title: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, runs in by_config(results, but="gpus").items():
        runs = sorted(runs, key=lambda r: r["gpus"])
        ax.plot([r["gpus"] for r in runs], [value(r) for r in runs], marker="o", label=label)
    ax.set_xlabel("gpus (ranks)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_xticks(sorted({r["gpus"] for r in results}))
    ax.grid(alpha=0.3)
    ax.legend(title="config", fontsize=8)
    return fig


def node_peak_figure(results: list[dict[str, Any]]) -> plt.Figure:
    return _lines_vs_gpus(
        results, lambda r: r.get("node_peak_gib") or 0, "GiB above baseline", "Node host peak (MemTotal − MemAvailable)"
    )


def load_time_figure(results: list[dict[str, Any]]) -> plt.Figure:
    return _lines_vs_gpus(results, load_time_s, "seconds (sum of the .load stages)", "Load time")


def stage_bars_figure(results: list[dict[str, Any]]) -> plt.Figure:
    """Per job: host memory each stage added (stacked: the rises add up to the job's growth), and, where GPUs were
    measured, each stage's GPU peak (points per stage: peaks do not add up, so they are not stacked)."""
    stages = list(dict.fromkeys(s["stage"] for r in results for s in r["stages"]))
    colors = stage_colors(stages)
    gpu_key = "gpu_cuda_peak_allocated_gib"
    gpu = any(s.get(gpu_key) is not None for r in results for s in r["stages"])
    keys = swept_keys(results)
    labels = [f"{config_label(r, keys, sep=chr(10))}\n{r['status']}" for r in results]
    fig, axes = plt.subplots(
        1, 2 if gpu else 1, figsize=(max(7, 1.3 * len(results) + 4) * (1.6 if gpu else 1), 4.8), squeeze=False
    )
    host = axes[0][0]
    bottom = [0.0] * len(results)
    for stage in stages:
        heights = [
            max(next((s.get("node_rise_gib") or 0.0 for s in r["stages"] if s["stage"] == stage), 0.0), 0.0) for r in results
        ]
        host.bar(labels, heights, bottom=bottom, label=stage, color=colors[stage])
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    host.set_title(f"Host: {COLUMN['node_rise_gib'].header} per stage (stacked)")
    host.set_ylabel("GiB")
    host.tick_params(axis="x", labelsize=8)
    if gpu:
        ax = axes[0][1]
        for i, r in enumerate(results):
            for stage in stages:
                value = next((s.get(gpu_key) for s in r["stages"] if s["stage"] == stage), None)
                if value is not None:
                    ax.scatter(i, value, color=colors[stage], s=30)
        ax.set_xticks(range(len(results)), labels, fontsize=8)
        ax.set_title(f"GPU: {COLUMN[gpu_key].header} in each stage, max rank")
        ax.set_ylabel("GiB")
    axes[0][-1].legend(
        handles=[plt.Rectangle((0, 0), 1, 1, color=colors[s]) for s in stages],
        labels=stages,
        title="stage",
        fontsize=7,
        bbox_to_anchor=(1.02, 1),
        loc="upper left",
        ncol=1 + len(stages) // 18,
    )
    return fig


def timeline_figure(line: Timeline, title: str) -> plt.Figure:
    """Memory over time: host panel (node, ranks), GPU panel where GPUs were sampled; stage bands and lines."""
    gpu = bool(line.series.gpu_used_gib)
    fig, axes = plt.subplots(2 if gpu else 1, 1, figsize=(11, 6.5 if gpu else 4.6), sharex=True, squeeze=False)
    host = axes[0][0]
    colors = stage_colors([w.name for w in line.stages])
    for ax in (a[0] for a in axes):
        for w in line.stages:
            ax.axvspan(w.start_s, max(w.end_s, w.start_s + 1e-3), color=colors[w.name], alpha=0.18, lw=0)
    host.plot(line.series.time_s, line.series.node_gib, color="black", lw=1.8, label="node used (above baseline)")
    for rank, values in line.series.rank_pss_anon_gib.items():
        host.plot(line.series.time_s, values, lw=1, label=f"rank {rank} Pss_Anon")
    for rank, values in line.series.rank_rss_gib.items():
        host.plot(line.series.time_s, values, lw=0.8, ls=":", label=f"rank {rank} RSS")
    for w in line.stages:
        if w.planned_node_gib is not None:
            host.hlines(w.planned_node_gib, w.start_s, max(w.end_s, w.start_s + 1e-3), colors="tab:blue", linestyles="--", lw=1.2)
    if any(w.planned_node_gib is not None for w in line.stages):
        host.plot([], [], color="tab:blue", ls="--", label="planned node peak per stage")
    if line.limit_gib is not None and line.limit_gib < 3 * max(line.series.node_gib + [0.1]):
        host.axhline(line.limit_gib, color="red", ls="-.", lw=1.2, label="watchdog limit")
    top = max(line.series.node_gib + [v or 0 for vs in line.series.rank_rss_gib.values() for v in vs] + [0.1])
    for w in line.stages:  # stage names along the top of the bands
        host.text(
            (w.start_s + w.end_s) / 2, top * 1.02, w.name, rotation=90, fontsize=6, ha="center", va="bottom", color=colors[w.name]
        )
    if line.failure:
        for ax in (a[0] for a in axes):
            ax.axvline(line.failure["time_s"], color="red", lw=2)
        host.annotate(
            f"failed: {line.failure['stage']}", (line.failure["time_s"], top * 0.9), color="red", fontsize=8, ha="right"
        )
    host.set_ylabel("host GiB")
    host.set_ylim(bottom=min(0.0, *line.series.node_gib), top=top * 1.35)
    host.legend(fontsize=7, loc="upper left", ncol=2)
    host.set_title(title)
    if gpu:
        ax = axes[1][0]
        for index, values in line.series.gpu_used_gib.items():
            ax.plot(line.series.time_s, values, lw=1.2, label=f"GPU {index} used (NVML)")
        ax.set_ylabel("GPU GiB")
        ax.legend(fontsize=7, loc="upper left")
    axes[-1][0].set_xlabel("seconds since the watcher's first sample")
    return fig


def _table(headers: list[str], rows: list[list[str]], css: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{css}'><tr>{head}</tr>{body}</table>"


def _figure(fid: str, caption: str, fig: plt.Figure, series: list[str] | None = None) -> str:
    """A figure as an inline PNG; `series`: its lines' labels, named under it (the legend is inside the image)."""
    image = f'<img class="plot" alt="{fid}" src="data:image/png;base64,{_png(fig)}">'
    listed = ""
    if series is not None:
        items = "".join(f"<li>{html.escape(label)}</li>" for label in series)
        listed = f"<ul class='series' data-series='{len(series)}'>{items}</ul>"
    return f'<figure id="{fid}"><figcaption>{html.escape(caption)}</figcaption>{image}{listed}</figure>'


def job_section(result: dict[str, Any], index: int, keys: list[str]) -> str:
    row = comparison_row(result, keys)
    line = build_timeline(result)
    title = f"{row['job']} · {row['config']} · {row['status']}" if keys else f"{row['job']} · {row['status']}"
    parts = [f"<h2 id='job{index}'>{html.escape(title)}</h2>"]
    if row["emulated"]:
        parts.append(f"<p class='emulated'>emulated {html.escape(row['emulated'])}</p>")
    failure = Failure.from_dict(result.get("failure"))
    if failure and result.get("status") != "completed":
        where = f"{result['status']} at {failure.stage}: {failure.reason[:500]}"
        parts.append(f"<p class='failure'>{html.escape(where)}</p>")
    if not line.empty:
        parts.append(_figure(f"timeline{index}", "Memory over time", timeline_figure(line, title)))
    compared = compare(result) if result.get("stages") else []
    if compared:
        columns = [("stage", "stage"), ("node_planned", "node planned"), ("node_measured", "node measured")]
        columns += [("rank_rise_planned", "rank rise planned"), ("rank_rise_measured", "rank rise measured")]
        if any(c["gpu_measured"] is not None for c in compared):  # no GPU columns for a CPU run
            columns += [("gpu_planned", "GPU planned"), ("gpu_measured", "GPU measured")]
        for name, (_, label) in COMPARED.items():
            columns += [(f"{name}_planned", f"{label} planned"), (f"{name}_measured", f"{label} measured")]
        rows = [[fmt(c[key]) for key, _ in columns] for c in compared]
        parts.append("<h3>Plan vs measured (GiB)</h3>" + _table([h for _, h in columns], rows))
    return "".join(parts)


def render(results: list[dict[str, Any]], title: str) -> str:
    keys = swept_keys(results)
    rows = [[fmt(comparison_row(r, keys)[key]) for key, _, _ in COLUMNS] for r in results]
    parts = [_table([h for _, h, _ in COLUMNS], rows, "summary")]
    measured = [r for r in results if r.get("stages")]
    if len({r["gpus"] for r in measured}) > 1:
        series = list(by_config(measured, but="gpus"))  # one line per configuration, as the figures draw them
        caption = "vs GPUs, one line per configuration (every swept key but gpus)"
        parts.append(_figure("node_peak_vs_gpus", f"Node host peak {caption}", node_peak_figure(measured), series))
        parts.append(_figure("load_time_vs_gpus", f"Load time {caption}", load_time_figure(measured), series))
    if measured:
        parts.append(_figure("stage_bars", "Per-stage host and GPU memory, per job", stage_bars_figure(measured)))
    parts += [job_section(r, i, keys) for i, r in enumerate(results)]
    style = (
        "body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px;border-bottom:1px solid #ddd}"
        "img{max-width:100%}.failure{color:#b00}figure{margin:1em 0}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{''.join(parts)}</body></html>"
    )


def write_report(path: Path, output: Path | None = None) -> Path:
    """report.html for the sweep or run at `path` (beside multirun.yaml, or in the run dir)."""
    results = load_results(path)
    out = output or path / REPORT
    kind = "run" if (path / RESULT).exists() else "sweep"
    out.write_text(render(results, f"rlhf_exp {kind} {path.name}"))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m rlhf_exp report <dir>`: 0 with the report written, 2 (one line) when there is no result to report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", type=Path, help="a sweep dir (multirun) or a run dir")
    parser.add_argument("-o", "--output", type=Path, default=None, help=f"default: <path>/{REPORT}")
    args = parser.parse_args(argv)
    try:
        out = write_report(args.path, args.output)
    except NoResults as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
