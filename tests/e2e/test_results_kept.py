"""No result is ever lost: checks run before a job dir is touched, a completed result of another config is never
overwritten, sweep job dirs are unique per config, and a sweep job refused by a check still gets its result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import app_env, run_sweep_in

QUICK = ("gpus=1", "roles=[actor]", "ppo.steps=0", "wandb.mode=disabled")


def run(run_dir: Path, cache: Path, *overrides: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rlhf_exp", f"hydra.run.dir={run_dir}", *QUICK, *overrides]
    return subprocess.run(cmd, cwd=run_dir.parent, env=app_env(cache), capture_output=True, text=True, timeout=600)


def records(run_dir: Path) -> dict[Path, bytes]:
    """Every file the job wrote (Hydra's own .hydra/ describes the latest invocation, refused or not)."""
    return {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and ".hydra" not in p.parts}


def test_a_completed_result_survives_failed_checks_and_other_configs(tmp_path: Path, ckpt_cache: Path) -> None:
    run_dir = tmp_path / "run"
    assert run(run_dir, ckpt_cache).returncode == 0
    page = subprocess.run([sys.executable, "-m", "rlhf_exp", "report", str(run_dir)], capture_output=True, text=True, timeout=300)
    assert page.returncode == 0 and 'alt="timeline0"' in (run_dir / "report.html").read_text()  # a single run's page
    (run_dir / "report.html").unlink()
    kept = records(run_dir)
    failing = run(run_dir, ckpt_cache, "model=local", f"model.actor.path={tmp_path}", f"model.critic.path={tmp_path}")
    assert failing.returncode == 2  # a check fails (no config.json there): nothing in the dir touched
    other = run(run_dir, ckpt_cache, "seed=7")
    assert other.returncode == 2
    assert other.stderr.strip() == (
        f"error: hydra.run.dir: {run_dir} holds the completed result of another config, kept; valid: another "
        f"hydra.run.dir, or move {run_dir / 'result.json'} away to run there"
    )
    assert records(run_dir) == kept


def test_sweeps_of_different_configs_into_one_dir_keep_every_result(tmp_path: Path, ckpt_cache: Path) -> None:
    sweep = tmp_path / "sweep"
    proc, first = run_sweep_in(sweep, ckpt_cache, *QUICK, "lora.r=8,16")
    assert proc.returncode == 0 and [r["status"] for r in first] == ["completed"] * 2
    proc, _ = run_sweep_in(sweep, ckpt_cache, *QUICK, "lora.r=32")
    assert proc.returncode == 0
    results = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/result.json"))]
    assert sorted(r["config"]["lora"]["r"] for r in results) == [8, 16, 32]  # job 0 of each sweep: two dirs
    assert len({r["job_dir"] for r in results}) == 3


def test_a_sweep_job_refused_by_a_check_is_recorded_and_the_sweep_goes_on(tmp_path: Path, ckpt_cache: Path) -> None:
    sweep = tmp_path / "sweep"
    proc, results = run_sweep_in(sweep, ckpt_cache, *QUICK, "fault.stage=null,actor.lod")
    assert proc.returncode == 1, proc.stderr[-2000:]  # the sweep went on, and says a job failed
    assert [r["status"] for r in results] == ["completed", "failed"]
    assert results[1]["failure"]["stage"] == "config"
    assert results[1]["failure"]["reason"].startswith("fault.stage: 'actor.lod' is not a stage of this job; valid: dist_init")
    assert "error: fault.stage: 'actor.lod'" in proc.stderr
