"""A comparison report without W&B: `python -m rlhf_exp report <multirun dir> [-o report.html]`.

Reads every job's result.json under the sweep dir and writes one HTML page with three figures
(matplotlib, embedded as PNG): node host peak vs gpus per loader; per-stage stacked bars of host
and GPU memory per job; load time vs gpus per loader.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rlhf_exp.jobdir import RESULT  # noqa: E402
from rlhf_exp.report.record import COLUMN  # noqa: E402
from rlhf_exp.report.summary import load_time_s  # noqa: E402


def load_results(sweep_dir: Path) -> list[dict[str, Any]]:
    results = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob(f"**/{RESULT}"))]
    if not results:
        raise SystemExit(f"error: no {RESULT} under {sweep_dir}")
    return sorted(results, key=lambda r: (r["loader"], r["gpus"]))


def by_loader(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[r["loader"]].append(r)
    return dict(groups)


def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _lines_vs_gpus(results: list[dict[str, Any]], value, ylabel: str, title: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for loader, runs in by_loader(results).items():
        runs = sorted(runs, key=lambda r: r["gpus"])
        ax.plot([r["gpus"] for r in runs], [value(r) for r in runs], marker="o", label=loader)
    ax.set_xlabel("gpus (ranks)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_xticks(sorted({r["gpus"] for r in results}))
    ax.grid(alpha=0.3)
    ax.legend(title="loader")
    return fig


def node_peak_figure(results: list[dict[str, Any]]) -> plt.Figure:
    return _lines_vs_gpus(
        results, lambda r: r.get("node_peak_gib") or 0, "GiB above baseline", "Node host peak (MemTotal − MemAvailable)"
    )


def load_time_figure(results: list[dict[str, Any]]) -> plt.Figure:
    return _lines_vs_gpus(results, load_time_s, "seconds (sum of the four .load stages)", "Load time")


def stage_bars_figure(results: list[dict[str, Any]]) -> plt.Figure:
    """Per job, stacked per-stage figures: host = each stage's node rise; GPU = each stage's peak allocation."""
    stages = [s["stage"] for s in max(results, key=lambda r: len(r["stages"]))["stages"]]
    labels = [f"{r['loader']}\ngpus={r['gpus']}" for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.3 * len(results) + 4), 4.8), sharey=False)
    cmap = plt.get_cmap("tab10")
    for ax, key, title in (
        (axes[0], "node_rise_gib", f"Host: {COLUMN['node_rise_gib'].header} per stage"),
        (axes[1], "gpu_cuda_peak_allocated_gib", f"GPU: {COLUMN['gpu_cuda_peak_allocated_gib'].header} per stage, max rank"),
    ):
        bottom = [0.0] * len(results)
        for i, stage in enumerate(stages):
            heights = []
            for r in results:
                row = next((s for s in r["stages"] if s["stage"] == stage), {})
                heights.append(max(row.get(key) or 0.0, 0.0))
            ax.bar(labels, heights, bottom=bottom, label=stage, color=cmap(i % 10))
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_title(title)
        ax.tick_params(axis="x", labelsize=8)
    axes[1].legend(title="stage", fontsize=8, bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


FIGURES = (
    ("node_peak_vs_gpus", "Node host peak vs GPUs, per loader", node_peak_figure),
    ("stage_bars", "Per-stage host and GPU memory, per job", stage_bars_figure),
    ("load_time_vs_gpus", "Load time vs GPUs, per loader", load_time_figure),
)


def render(results: list[dict[str, Any]], title: str) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(r['loader'])}</td><td>{r['gpus']}</td><td>{r['status']}</td>"
        f"<td>{r.get('node_peak_gib')}</td><td>{load_time_s(r):.2f}</td></tr>"
        for r in results
    )
    figures = "".join(
        f'<figure id="{fid}"><figcaption>{caption}</figcaption>'
        f'<img alt="{fid}" src="data:image/png;base64,{_png(make(results))}"></figure>'
        for fid, caption, make in FIGURES
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px}img{max-width:100%}</style></head>"
        f"<body><h1>{html.escape(title)}</h1><table><tr><th>loader</th><th>gpus</th><th>status</th>"
        f"<th>node peak GiB</th><th>load s</th></tr>{rows}</table>{figures}</body></html>"
    )


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: <sweep_dir>/report.html")
    args = parser.parse_args(argv)
    results = load_results(args.sweep_dir)
    out = args.output or args.sweep_dir / "report.html"
    out.write_text(render(results, f"rlhf_exp sweep {args.sweep_dir.name}"))
    print(f"report: {out} ({len(results)} jobs)")
    return out


if __name__ == "__main__":
    main()
