"""The report's comparison figures on synthetic results: a panel only where there is data, a colour per stage."""

from __future__ import annotations

from rlhf_exp.report.html import stage_bars_figure, stage_colors


def result(loader: str, gpu: bool) -> dict:
    stages = []
    for i, name in enumerate(("actor.load", "actor.init", "ppo1.train_actor")):
        row = {"stage": name, "node_rise_gib": 0.5 * (i + 1)}
        if gpu:
            row["gpu_cuda_peak_allocated_gib"] = 2.0 + i
        stages.append(row)
    return {"loader": loader, "gpus": 1, "status": "completed", "stages": stages}


def test_a_cpu_sweep_has_no_gpu_panel_and_a_gpu_sweep_plots_peaks_unstacked() -> None:
    cpu = stage_bars_figure([result("naive", False), result("direct", False)])
    assert len(cpu.axes) == 1 and len(cpu.axes[0].containers) == 3  # stacked host rises, one series per stage
    gpu = stage_bars_figure([result("naive", True), result("direct", True)])
    assert len(gpu.axes) == 2
    points = [tuple(c.get_offsets()[0]) for c in gpu.axes[1].collections]
    assert sorted(y for _, y in points) == [2.0, 2.0, 3.0, 3.0, 4.0, 4.0]  # each stage's own peak, not a running sum


def test_every_stage_gets_its_own_colour_however_many() -> None:
    for n in (4, 20, 45):  # ppo.steps=10 gives 49 stages
        colors = stage_colors([f"s{i}" for i in range(n)])
        assert len(set(colors.values())) == n


def test_report_without_a_readable_result_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    from rlhf_exp.report.html import main

    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: no result.json in or under {tmp_path}"
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "result.json").write_text('{"status": "comp')  # cut short by a killed writer
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {tmp_path / 'job' / 'result.json'} is not a readable result (") and "\n" not in err


def swept_job(root, num: int, overrides: dict[str, str], node_peak: float) -> dict:
    """A job dir as a sweep leaves it: Hydra's .hydra/overrides.yaml beside the job's result."""
    job_dir = root / f"{num}_job"
    (job_dir / ".hydra").mkdir(parents=True)
    (job_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {k}={v}\n" for k, v in overrides.items()))
    return {
        **result(overrides["loader"], False),
        "gpus": int(overrides["gpus"]),
        "job_dir": str(job_dir),
        "node_peak_gib": node_peak,
    }


def test_a_sweep_over_gpus_loader_zero_and_lora_labels_every_job_and_never_merges_configs(tmp_path) -> None:
    from itertools import product

    from rlhf_exp.report.comparison import comparison_row, swept_keys
    from rlhf_exp.report.html import node_peak_figure

    grid = product(("1", "2"), ("naive", "staggered"), ("stage2", "stage3"), ("r8", "disabled"))
    jobs = [
        swept_job(tmp_path, i, {"model": "tiny", "gpus": g, "loader": lo, "zero": z, "lora": r}, float(i))
        for i, (g, lo, z, r) in enumerate(grid)
    ]
    keys = swept_keys(jobs)
    assert keys == ["gpus", "loader", "lora", "zero"]  # model is the same in every job: not a label
    labels = [comparison_row(j, keys)["config"] for j in jobs]
    assert len(set(labels)) == 16 and labels[0] == "gpus=1 loader=naive lora=r8 zero=stage2"
    lines = node_peak_figure(jobs).axes[0].get_lines()
    assert len(lines) == 8 and all(len(line.get_xdata()) == 2 for line in lines)  # one line per config, over gpus
    assert sorted(line.get_label() for line in lines)[0] == "loader=naive lora=disabled zero=stage2"
    bars = stage_bars_figure(jobs)
    ticks = [t.get_text() for t in bars.axes[0].get_xticklabels()]
    assert len(set(ticks)) == 16  # one bar per job: none stacked onto another with the same label
