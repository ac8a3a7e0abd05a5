"""Faults beyond a raising or killed rank: a hung rank, a job past its timeout, the watcher killed, files that
cannot grow, resume. Each job must end in bounded time, failed, naming what failed and where, samples kept."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import psutil
from conftest import RunApp, app_env, assert_quiet_console, run_sweep_in

from rlhf_exp.job.result import completed_result
from rlhf_exp.jobdir import JobDir
from rlhf_exp.loaders.registry import auto_order
from rlhf_exp.report.tracking import wandb_run_dirs
from rlhf_exp.report.wandb_offline import read_offline_run

ACTOR_ONLY = ("roles=[actor]", "ppo.steps=0", "wandb.mode=disabled")  # the cheapest real job


def assert_failed_cleanly(proc: subprocess.CompletedProcess, result: dict | None, *stages: str) -> dict:
    """A failed job, attributed to one of `stages`, with its samples kept and no rank left running."""
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert_quiet_console(proc.stdout + proc.stderr)
    assert result is not None and result["status"] == "failed"
    failure = result["failure"]
    assert failure["stage"] in stages, failure
    assert result["samples"] > 0  # the watcher's record up to the failure is kept
    pids = {r["pid"] for row in result["stages"] for r in row["per_rank"] if "pid" in r}
    assert pids and not any(psutil.pid_exists(p) for p in pids)  # no orphaned rank
    return failure


def test_hung_rank_is_blamed_after_the_distributed_timeout(run_app: RunApp) -> None:
    proc, result = run_app(
        "gpus=2", *ACTOR_ONLY, "fault.stage=actor.load", "fault.rank=1", "fault.mode=hang", "dist_timeout_s=10", timeout=300
    )
    failure = assert_failed_cleanly(proc, result, "actor.load")
    # rank 0 timed out at the next barrier; the failure names the rank it waited for
    assert failure["rank"] == 1 and failure["hung"] and "timed out waiting" in failure["reason"]
    assert result["wall_s"] < 120
    assert "FAILED at stage actor.load on rank 1" in proc.stdout


def test_job_timeout_stops_a_hung_job_and_the_wandb_run_says_so(run_app: RunApp) -> None:
    # hanging in the first stage (before the process group exists, so no distributed timeout can end it)
    proc, result = run_app(
        "gpus=1", "roles=[actor]", "ppo.steps=0", "fault.stage=dist_init", "fault.mode=hang", "job_timeout_s=18", timeout=300
    )
    failure = assert_failed_cleanly(proc, result, "dist_init")
    assert failure["rank"] == 0 and "job_timeout_s=18 exceeded" in failure["reason"]
    assert result["wall_s"] < 18 + 30
    (run_dir,) = wandb_run_dirs(Path(result["job_dir"]))
    summary = read_offline_run(run_dir)["summary"]
    assert summary["status"] == "failed" and summary["failure/stage"] == "dist_init"
    assert "job_timeout_s=18" in summary["failure/reason"]


def test_killed_watcher_stops_the_job_naming_it(run_app: RunApp) -> None:
    proc, result = run_app("gpus=1", *ACTOR_ONLY, "fault.stage=actor.load", "fault.mode=kill_watcher", timeout=300)
    # the fault keeps the rank in actor.load until the guard stops the job, as a long load would
    failure = assert_failed_cleanly(proc, result, "actor.load")
    assert failure["process"] == "watcher" and failure["signal"] == "SIGKILL" and failure["rank"] is None
    assert "watcher process died (killed by SIGKILL)" in failure["reason"]


def test_outputs_that_cannot_be_written_fail_before_any_rank(tmp_path: Path, ckpt_cache: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    cmd = [sys.executable, "-m", "rlhf_exp", f"hydra.run.dir={blocker}/run", *ACTOR_ONLY]
    proc = subprocess.run(cmd, cwd=tmp_path, env=app_env(ckpt_cache), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: hydra.run.dir: cannot write {blocker}/run")


def test_a_file_that_cannot_grow_fails_the_job_and_keeps_what_was_written(tmp_path: Path, ckpt_cache: Path) -> None:
    """RLIMIT_FSIZE stands in for a full disk: writes past the limit fail with EFBIG (Python ignores SIGXFSZ)."""
    limit = 48 * 1024  # the watcher's samples.jsonl reaches it within seconds at a 5 ms period

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "rlhf_exp",
        f"hydra.run.dir={run_dir}",
        "gpus=1",
        "watcher.interval_s=0.005",
        "wandb.mode=disabled",
    ]
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=app_env(ckpt_cache), capture_output=True, text=True, timeout=300, preexec_fn=small_files
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and result["failure"]["process"] == "watcher"
    assert "File too large" in result["failure"]["reason"]
    assert result["samples"] > 0 and (run_dir / "samples.jsonl").stat().st_size <= limit


def test_rerunning_a_sweep_keeps_complete_jobs_and_reruns_failed_ones(tmp_path: Path, ckpt_cache: Path) -> None:
    sweep = tmp_path / "sweep"
    args = ("gpus=1", *ACTOR_ONLY, "fault.stage=null,actor.init", "loader=auto")
    proc, first = run_sweep_in(sweep, ckpt_cache, *args)
    assert proc.returncode == 1 and [r["status"] for r in first] == ["completed", "failed"]  # a job failed: exit 1
    # loader=auto: the planner's pick, the fastest loader whose plan fits (plenty of room for the tiny model; ZeRO-2, so
    # no loader that partitions): the first of measured_speed.json's order
    fastest = next(spec.name for spec in auto_order() if not spec.partitioned)
    assert first[0]["loader"] == fastest and first[0]["plan"]["requested_loader"] == "auto"
    proc, second = run_sweep_in(sweep, ckpt_cache, *args)
    assert proc.returncode == 1
    assert second[0] == first[0]  # kept as it was: not run again
    assert second[1]["status"] == "failed" and second[1]["wall_s"] != first[1]["wall_s"]  # run again
    assert proc.stdout.count("skipped:") == 1
    # what decides: a completed result of the very same config (resume=false never asks)
    job_dir, config = Path(first[0]["job_dir"]), first[0]["config"]
    assert completed_result(JobDir(job_dir), config) == first[0]
    assert completed_result(JobDir(job_dir), {**config, "seed": 1}) is None
    assert completed_result(JobDir(Path(second[1]["job_dir"])), second[1]["config"]) is None  # failed: run again
