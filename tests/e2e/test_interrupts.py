"""Ctrl-C and SIGTERM stop what the user meant: the running job is recorded as interrupted at its stage, the
sweep starts no further job, no process is left; the ranks die with a SIGKILLed job process. Real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import app_env, assert_quiet_console, wait_for_stage

HANG = ("gpus=1", "roles=[actor,ref]", "ppo.steps=0", "fault.stage=ref.load", "fault.mode=hang", "wandb.mode=disabled")


def rank_pids(job_dir: Path) -> set[int]:
    pids = set()
    for events in (job_dir / "events").glob("rank*.jsonl"):
        first = json.loads(events.read_text().splitlines()[0])
        pids.add(first["pid"])
    return pids


def gone(pids: set[int], within_s: float = 15) -> bool:
    deadline = time.time() + within_s
    while time.time() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_sweep_stops_it_and_records_the_job_as_interrupted(
    sig: signal.Signals, tmp_path: Path, ckpt_cache: Path
) -> None:
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "rlhf_exp", "-m", f"hydra.sweep.dir={sweep}", *HANG, "seed=1,2"]  # two jobs
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=app_env(ckpt_cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job_dir = wait_for_stage(sweep, "ref.load")
    ranks = rank_pids(job_dir)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert_quiet_console(out + err)
    result = json.loads((job_dir / "result.json").read_text())
    assert result["status"] == "interrupted" and result["failure"]["stage"] == "ref.load"
    assert result["failure"]["reason"] == f"job stopped by {sig.name}" and result["samples"] > 0
    assert len(list(sweep.glob("*/result.json"))) == 1 and not list(sweep.glob("1_*"))  # the second job never started
    assert gone(ranks)
    watcher = int((job_dir / "watcher.pid").read_text())
    assert gone({watcher})


def test_ctrl_c_to_the_process_group_stops_everything(tmp_path: Path, ckpt_cache: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlhf_exp", f"hydra.run.dir={run_dir}", *HANG]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=app_env(ckpt_cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    wait_for_stage(run_dir, "ref.load")
    ranks = rank_pids(run_dir)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process of the group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert_quiet_console(out + err)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "interrupted" and result["failure"]["stage"] == "ref.load"
    assert gone(ranks)


def test_ranks_die_with_a_sigkilled_job_process(tmp_path: Path, ckpt_cache: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlhf_exp", f"hydra.run.dir={run_dir}", *HANG]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=app_env(ckpt_cache), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_stage(run_dir, "ref.load")
    ranks = rank_pids(run_dir)
    proc.kill()
    proc.wait(timeout=30)
    assert gone(ranks, within_s=5)  # the kernel's PR_SET_PDEATHSIG, not a poll
    assert gone({int((run_dir / "watcher.pid").read_text())}, within_s=10)  # the watcher sees its parent gone
