"""The sweep comparison as a W&B report (wandb-workspaces): the HTML report's figures, in W&B.

`python -m rlhf_exp.report.wandb_report --project P [--entity E] --group SWEEP [--save]` builds the spec
and, with --save (needs W&B online and a login), creates the report. Built offline, the spec is
checked against the summary keys the runs really carry (tests/e2e/test_sweep_tracking.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from rlhf_exp.config.stages import job_stages
from rlhf_exp.report.record import COLUMN, summary_key

STAGES = job_stages(ppo_steps=1)  # the default job's stages
GROUP_BY = "loader.name"  # the config key the runs are grouped by (W&B config keys are the job's, dotted)


def report_metrics() -> dict[str, list[str]]:
    """Summary keys each panel plots (what tracking.summary_of writes)."""
    return {
        "node_peak_vs_gpus": ["node_peak_gib"],
        "load_time_vs_gpus": ["load_time_s"],
        "stage_host": [summary_key(s, "node_rise_gib") for s in STAGES],
        "stage_gpu": [summary_key(s, "gpu_cuda_peak_allocated_gib") for s in STAGES],
    }


def build_report(project: str, entity: str | None, group: str | None) -> Any:
    import wandb_workspaces.reports.v2 as wr

    metrics = report_metrics()
    # the sweep's runs (their W&B group), one line or bar per loader (the config key every run carries)
    runset = wr.Runset(
        entity=entity or "",
        project=project,
        name=group or "all runs",
        filters=f"Group = '{group}'" if group else "",
        groupby=[f"config.{GROUP_BY}"],
    )
    panels = [
        wr.ScatterPlot(title="Node host peak vs GPUs (GiB)", x=wr.Config("gpus"), y=wr.SummaryMetric("node_peak_gib")),
        wr.ScatterPlot(title="Load time vs GPUs (s)", x=wr.Config("gpus"), y=wr.SummaryMetric("load_time_s")),
        wr.BarPlot(title=f"Host: {COLUMN['node_rise_gib'].header}", metrics=[wr.SummaryMetric(m) for m in metrics["stage_host"]]),
        wr.BarPlot(
            title=f"GPU: {COLUMN['gpu_cuda_peak_allocated_gib'].header}",
            metrics=[wr.SummaryMetric(m) for m in metrics["stage_gpu"]],
        ),
    ]
    return wr.Report(
        project=project,
        entity=entity or "",
        title=f"rlhf_exp: loaders × GPUs{f' ({group})' if group else ''}",
        description="Node host peak, per-stage host/GPU memory and load time per loader and GPU count.",
        blocks=[wr.H1("Memory per loading strategy"), wr.PanelGrid(runsets=[runset], panels=panels)],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--project", default="rlhf_exp")
    parser.add_argument("--entity", default=None)
    parser.add_argument("--group", default=None, help="the sweep (W&B group) to show; default: every run")
    parser.add_argument("--save", action="store_true", help="create the report on W&B (online)")
    args = parser.parse_args(argv)
    report = build_report(args.project, args.entity, args.group)
    if args.save:
        report.save()
        print(f"report: {report.url}")
    else:
        print(f"report spec built ({len(report.blocks)} blocks); add --save to create it on W&B")


if __name__ == "__main__":
    main()
