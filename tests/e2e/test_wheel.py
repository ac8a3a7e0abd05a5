"""An installed wheel works on its own: configs ship inside the package; `plan` and a tiny job run outside the tree."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO, app_env


@pytest.mark.slow
def test_an_installed_wheel_plans_and_runs_a_job_outside_the_source_tree(tmp_path: Path, ckpt_cache: Path) -> None:
    source = tmp_path / "source"  # a copy: building writes build/ beside the sources
    skip = shutil.ignore_patterns(".*", "__pycache__", "*.egg-info", "build", "tests", "bench", "outputs", "multirun")
    shutil.copytree(REPO, source, ignore=skip)
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(source)]
    subprocess.run(build, check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = wheels.glob("rlhf_exp-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, text=True, timeout=300)
    # the dependencies (torch, deepspeed, ...) from this environment, after the wheel on sys.path; its .pth files
    # (this checkout's editable install among them) are not read from there
    (site / "rlhf_exp_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = app_env(ckpt_cache)

    where = subprocess.run(
        [str(python), "-c", "import rlhf_exp; print(rlhf_exp.__file__)"], cwd=workdir, env=env, capture_output=True, text=True
    )
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr

    plan = subprocess.run(
        [str(python), "-m", "rlhf_exp", "plan", "gpus=2"], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
    )
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "plan: loader=naive, 2 rank(s) on cpu" in plan.stdout and "reward.init" in plan.stdout

    run_dir = workdir / "run"
    job = [str(python), "-m", "rlhf_exp", "gpus=1", "ppo.steps=0", "wandb.mode=disabled", f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(job, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "completed" and result["stages"][-1]["stage"] == "reward.init"
