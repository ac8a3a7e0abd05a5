"""A 2x2 multirun logged to W&B offline: one run per job with config, group and summary keys; and the HTML report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import run_sweep_in
from test_end_to_end import assert_complete_result

from rlhf_exp import report
from rlhf_exp.tracking import wandb_run_dirs


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, ckpt_cache: Path) -> tuple[Path, list[dict]]:
    sweep_dir = tmp_path_factory.mktemp("sweep2x2") / "sweep"
    proc, results = run_sweep_in(sweep_dir, ckpt_cache, "gpus=1,2", "loader=naive,low_mem", "wandb.mode=offline")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(results) == 4
    return sweep_dir, results


def test_every_job_completes_with_full_stage_records(sweep: tuple[Path, list[dict]]) -> None:
    for result in sweep[1]:
        assert_complete_result(result, result["gpus"], 2)


def test_one_offline_wandb_run_per_job_with_config_group_and_summary(sweep: tuple[Path, list[dict]]) -> None:
    sweep_dir, results = sweep
    for result in results:
        runs = wandb_run_dirs(Path(result["job_dir"]))
        assert len(runs) == 1 and runs[0].name.startswith("offline-run-")
        files = runs[0] / "files"
        config = yaml.safe_load((files / "config.yaml").read_text())
        assert config["gpus"]["value"] == result["gpus"]
        assert config["loader"]["value"]["name"] == result["loader"]
        assert config["zero"]["value"]["actor"]["stage"] == 2
        summary = json.loads((files / "wandb-summary.json").read_text())
        assert summary["status"] == "completed"
        for role in ("actor", "ref", "critic", "reward"):
            for phase in ("load", "init"):
                assert summary[f"mem/{role}.{phase}/node_peak_gib"] > 0
                assert summary[f"mem/{role}.{phase}/duration_s"] > 0
        assert summary["stages"]["_type"] == "table-file"
        metadata = json.loads((files / "wandb-metadata.json").read_text()) if (files / "wandb-metadata.json").exists() else {}
        run_record = (runs[0] / f"run-{runs[0].name.split('-')[-1]}.wandb").read_bytes()
        assert sweep_dir.name.encode() in run_record  # the group is the sweep
        assert f"loader={result['loader']}".encode() in run_record and f"gpus={result['gpus']}".encode() in run_record
        assert "WANDB_API_KEY" not in json.dumps(metadata)


def test_html_report_has_one_plot_per_figure_with_a_series_per_loader(sweep: tuple[Path, list[dict]]) -> None:
    sweep_dir, results = sweep
    out = report.main([str(sweep_dir)])
    page = out.read_text()
    assert len(re.findall(r"<img alt=", page)) == len(report.FIGURES) == 3
    for fid, _, _ in report.FIGURES:
        assert f'id="{fid}"' in page
    fig = report.node_peak_figure(results)
    assert sorted(line.get_label() for line in fig.axes[0].get_lines()) == ["low_mem", "naive"]
    assert all(len(line.get_xdata()) == 2 for line in fig.axes[0].get_lines())  # gpus 1 and 2
    bars = report.stage_bars_figure(results)
    assert len(bars.axes[0].containers) == len(results[0]["stages"])  # one stacked series per stage
