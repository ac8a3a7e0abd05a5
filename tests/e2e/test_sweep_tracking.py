"""A 2x2 multirun logged to W&B offline: one run per job with config, group and summary keys; and the HTML report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_sweep_in
from test_end_to_end import assert_complete_result
from test_ppo import assert_ppo_step

from rlhf_exp.report import html as report
from rlhf_exp.report.tracking import wandb_run_dirs
from rlhf_exp.report.wandb_offline import read_offline_run
from rlhf_exp.report.wandb_report import build_report, report_metrics

FAKE_KEY = "local-3f9c2a7d1e5b4c8a9f0e6d2b7a1c5e9f3d8b2a6c"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, ckpt_cache: Path) -> tuple[Path, list[dict]]:
    sweep_dir = tmp_path_factory.mktemp("sweep2x2") / "sweep"
    secret = {"WANDB_API_KEY": FAKE_KEY}  # offline runs never need it; it must not reach any output either
    overrides = ("gpus=1,2", "loader=naive,low_mem", "wandb.mode=offline", "verify_weights=true")
    proc, results = run_sweep_in(sweep_dir, ckpt_cache, *overrides, env=secret)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(results) == 4
    return sweep_dir, results


def test_every_job_completes_with_full_stage_records_and_a_ppo_step(sweep: tuple[Path, list[dict]]) -> None:
    for result in sweep[1]:
        assert_complete_result(result, result["gpus"], 2)
        assert_ppo_step(result, result["gpus"])  # ZeRO-2 at 1 and 2 ranks


def test_one_offline_wandb_run_per_job_with_config_group_and_summary(sweep: tuple[Path, list[dict]]) -> None:
    sweep_dir, results = sweep
    for result in results:
        runs = wandb_run_dirs(Path(result["job_dir"]))
        assert len(runs) == 1 and runs[0].name.startswith("offline-run-")
        run = read_offline_run(runs[0])  # wandb-core keeps config and summary in the run's .wandb log
        assert run["run"]["group"] == sweep_dir.name and run["run"]["job_type"] == result["loader"]
        assert {f"loader={result['loader']}", f"gpus={result['gpus']}", "zero=stage2", "model=tiny"} <= set(run["run"]["tags"])
        config = run["config"]
        assert config["gpus"] == result["gpus"] and config["loader"]["name"] == result["loader"]
        assert config["zero"]["actor"]["stage"] == 2 and config["wandb"]["mode"] == "offline"
        summary = run["summary"]
        assert summary["status"] == "completed" and run["exit_code"] == 0
        for role in ("actor", "ref", "critic", "reward"):
            for phase in ("load", "init"):
                assert summary[f"mem/{role}.{phase}/node_peak_gib"] > 0
                assert summary[f"mem/{role}.{phase}/duration_s"] > 0
        assert summary["stages/_type"] == "table-file" and summary["stages/nrows"] == len(result["stages"])
        assert run["history_rows"] >= 2 and "host/node_used_gib" in summary  # the watcher's time series
        assert "WANDB_API_KEY" not in json.dumps(run)


def test_no_secret_is_written_to_any_output(sweep: tuple[Path, list[dict]]) -> None:
    sweep_dir, _ = sweep
    files = [f for f in sweep_dir.rglob("*") if f.is_file()]
    assert len(files) > 20  # configs, logs, events, samples, results, the W&B runs
    assert not [f for f in files if FAKE_KEY.encode() in f.read_bytes()]


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


def test_wandb_report_spec_plots_only_keys_the_runs_carry(sweep: tuple[Path, list[dict]]) -> None:
    sweep_dir, results = sweep
    report = build_report("rlhf_exp", None, sweep_dir.name)
    (grid,) = [b for b in report.blocks if type(b).__name__ == "PanelGrid"]
    assert len(grid.panels) == 4 and grid.runsets[0].query == sweep_dir.name
    summary = read_offline_run(wandb_run_dirs(Path(results[0]["job_dir"]))[0])["summary"]
    for keys in report_metrics().values():
        for key in keys:
            if "gpu_cuda" not in key:  # GPU keys exist on GPU runs only
                assert key in summary, key
