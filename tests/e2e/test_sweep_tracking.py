"""A 2x2 multirun logged to W&B offline: one run per job with config, group and summary keys; and the HTML report."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import node_allowance, run_sweep_in
from test_end_to_end import assert_complete_result
from test_ppo import assert_ppo_step

from rlhf_exp.report import html as report
from rlhf_exp.report.table import CONSOLE_WIDTH
from rlhf_exp.report.timeline import build_timeline
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
    (sweep_dir / "console.txt").write_text(proc.stdout + proc.stderr)
    return sweep_dir, results


@pytest.fixture(scope="module")
def sweep_console(sweep: tuple[Path, list[dict]]) -> str:
    return (sweep[0] / "console.txt").read_text()


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
                assert summary[f"mem/{role}.{phase}/node_peak_gib"] > -node_allowance(
                    result
                )  # baseline drifts, the machine is shared
                assert summary[f"mem/{role}.{phase}/duration_s"] > 0
        assert summary["stages/_type"] == "table-file" and summary["stages/nrows"] == len(result["stages"])
        assert run["history_rows"] >= 2 and summary["host/node_used_gib"]["max"] >= 0  # the series, summarised as its peak
        assert {"mem/actor.load/node_peak_gib", "mem/ppo1.train_critic/duration_s"} <= set(run["history_keys"])  # live
        assert "WANDB_API_KEY" not in json.dumps(run)


def test_no_secret_is_written_to_any_output(sweep: tuple[Path, list[dict]]) -> None:
    sweep_dir, _ = sweep
    files = [f for f in sweep_dir.rglob("*") if f.is_file()]
    assert len(files) > 20  # configs, logs, events, samples, results, the W&B runs
    assert not [f for f in files if FAKE_KEY.encode() in f.read_bytes()]


def test_the_sweep_ends_with_a_comparison_table_and_its_report(sweep: tuple[Path, list[dict]]) -> None:
    sweep_dir, results = sweep
    page = (sweep_dir / "report.html").read_text()  # written by the sweep's Hydra callback, beside multirun.yaml
    assert (sweep_dir / "multirun.yaml").exists()
    figures = re.findall(r'<img class="plot" alt="([^"]+)"', page)
    assert figures == ["node_peak_vs_gpus", "load_time_vs_gpus", "stage_bars", "timeline0", "timeline1", "timeline2", "timeline3"]
    assert page.count("<h3>Plan vs measured (GiB)</h3>") == 4 and "GPU planned" not in page  # no GPU columns on CPU
    fig = report.node_peak_figure(results)
    assert sorted(line.get_label() for line in fig.axes[0].get_lines()) == ["loader=low_mem", "loader=naive"]
    assert all(len(line.get_xdata()) == 2 for line in fig.axes[0].get_lines())  # gpus 1 and 2
    bars = report.stage_bars_figure(results)
    assert len(bars.axes) == 1  # CPU runs: no GPU panel
    colors = [c.patches[0].get_facecolor() for c in bars.axes[0].containers]
    assert len(colors) == len(results[0]["stages"]) == len(set(colors))  # one distinct colour per stage
    line = build_timeline(results[0])
    assert [w.name for w in line.stages] == [s["stage"] for s in results[0]["stages"]]
    assert all(w.planned_node_gib is not None for w in line.stages if w.name != "dist_init" and not w.name.startswith("ppo"))
    assert line.limit_gib is not None and line.failure is None and len(line.series.rank_rss_gib) == results[0]["gpus"]


def test_the_console_is_quiet_and_informative(sweep_console: str) -> None:
    assert "plan: loader=" in sweep_console and "✓ actor.load" in sweep_console
    assert "build s: seconds" in sweep_console and "report:" in sweep_console  # the end-of-sweep table, its legend
    tables = [line for line in sweep_console.splitlines() if line[:1] in "┏┃┡│└"]  # the stage and sweep tables
    assert tables and max(map(len, tables)) <= CONSOLE_WIDTH  # 120 columns (README)
    assert re.search(r"│ 3   │ gpus=2 loader=low_mem", sweep_console), sweep_console[-3000:]  # named by its swept keys
    assert "wandb sync " in sweep_console and "offline-run-*" in sweep_console  # how to upload the offline runs
    for noise in ("FutureWarning", "wandb: ", "[WARNING]", "Setting accelerator"):
        assert noise not in sweep_console, noise


def test_the_timeline_reaches_wandb_and_the_reader_prints_whole_json(sweep: tuple[Path, list[dict]]) -> None:
    job_dir = Path(sweep[1][0]["job_dir"])
    proc = subprocess.run([sys.executable, "-m", "rlhf_exp.report.wandb_offline", str(job_dir)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)  # the whole record, valid JSON
    assert run["summary"]["timeline/stages/_type"] == "table-file"
    assert "timeline/host_memory_table" in json.dumps(run["summary"]) or "timeline/host_memory" in json.dumps(run["summary"])
    nothing = subprocess.run([sys.executable, "-m", "rlhf_exp.report.wandb_offline"], capture_output=True, text=True)
    assert nothing.returncode == 2 and nothing.stderr.startswith("usage:")


def test_wandb_report_spec_plots_only_keys_the_runs_carry(sweep: tuple[Path, list[dict]]) -> None:
    sweep_dir, results = sweep
    report = build_report("rlhf_exp", None, sweep_dir.name)
    (grid,) = [b for b in report.blocks if type(b).__name__ == "PanelGrid"]
    assert len(grid.panels) == 4 and grid.runsets[0].filters == f"Group = '{sweep_dir.name}'"
    run = read_offline_run(wandb_run_dirs(Path(results[0]["job_dir"]))[0])
    assert run["run"]["group"] == sweep_dir.name  # what the filter selects on
    section, *path = grid.runsets[0].groupby[0].split(".")  # config.loader.name: a key every run's config carries
    assert section == "config" and run["config"][path[0]][path[1]] == results[0]["loader"]
    summary = run["summary"]
    for keys in report_metrics().values():
        for key in keys:
            if "gpu_cuda" not in key:  # GPU keys exist on GPU runs only
                assert key in summary, key
