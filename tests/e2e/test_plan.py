"""The memory planner: its command, the fit check before any rank, loader=auto, and the watchdog.
(Planned-vs-measured tolerance is checked on every measured run: conftest.assert_plan_holds.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from conftest import RunApp, app_env, assert_quiet_console, wait_for_stage

from rlhf_exp.config.units import GIB
from rlhf_exp.memory import kernel as kernel_memory


def plan_cli(cache: Path, *overrides: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rlhf_exp", "plan", *overrides]
    return subprocess.run(cmd, env=app_env(cache), capture_output=True, text=True, timeout=300)


def test_plan_command_marks_the_first_stage_that_does_not_fit(ckpt_cache: Path) -> None:
    proc = plan_cli(ckpt_cache, "model=llama-13b", "gpus=8", "loader=naive")  # nothing generated or loaded
    assert proc.returncode == 1, proc.stderr[-2000:]
    table = proc.stdout
    assert "plan: loader=naive, 8 rank(s) on cpu" in table and "machine: this host: 1 node(s) x 8 rank(s)" in table
    (misfit,) = [line for line in table.splitlines() if "does not fit" in line and "│" in line]
    assert "actor.load" in misfit  # 8 fp32 copies of a 13B actor: the first load already does not fit
    for loader in ("direct", "low_mem", "rank0_broadcast", "naive", "staggered"):
        assert any(line.strip().startswith(loader) for line in table.splitlines())
    proc = plan_cli(ckpt_cache, "gpus=2")
    assert proc.returncode == 0 and "does not fit" not in proc.stdout


def test_a_plan_that_does_not_fit_stops_the_job_before_any_rank(run_app: RunApp) -> None:
    proc, result = run_app("plan.host_fraction=0.0001", timeout=300)
    assert proc.returncode == 2 and result is None
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: plan: loader=naive needs ") and "GiB of host memory at dist_init" in line
    assert "loaders that fit: none" in line and line.endswith("or plan.fit_check=false")
    assert "rank_main" not in proc.stdout + proc.stderr


def test_watchdog_stops_the_job_before_the_oom_killer(tmp_path: Path, ckpt_cache: Path) -> None:
    """The rank stalls in actor.load while the node's memory grows (this test's own pages, touched for real, stand
    in for a neighbour or a leak): the watchdog stops the job at that stage. The node's used memory moves with other
    processes (the job alone adds ~0.6 GiB before actor.load; the suite's other worker several GiB), so the limit
    sits 6 GiB above it and the pressure grows until the job stops."""
    total, used = kernel_memory.node_total_bytes(), kernel_memory.node_used_bytes()
    limit = (used + 6 * GIB) / total
    run_dir = tmp_path / "run"
    job = ("gpus=1", "roles=[actor]", "ppo.steps=0", "fault.stage=actor.load", "fault.mode=hang", "job_timeout_s=280")
    cmd = [sys.executable, "-m", "rlhf_exp", f"hydra.run.dir={run_dir}", *job, f"watcher.max_node_fraction={limit:.4f}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=app_env(ckpt_cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_stage(run_dir, "actor.load", proc=proc)
    pressure: list[bytes] = []
    while proc.poll() is None and len(pressure) < 28:  # up to 14 GiB, 512 MiB at a time
        pressure.append(b"\x01" * (512 << 20))
        time.sleep(0.3)
    out, err = proc.communicate(timeout=120)
    assert_quiet_console(out + err)
    pressure.clear()
    assert proc.returncode == 1, err[-2000:]
    failure = json.loads((run_dir / "result.json").read_text())["failure"]
    assert failure["process"] == "watchdog" and failure["rank"] is None and failure["stage"] == "actor.load"
    assert "watchdog: node memory" in failure["reason"] and "watcher.max_node_fraction" in failure["reason"]
    assert json.loads((run_dir / "result.json").read_text())["samples"] > 0


def test_plan_json_for_the_issue_529_node_from_a_machine_without_a_gpu(ckpt_cache: Path) -> None:
    """DeepSpeedExamples 529: 8 x A100-80G with 500 GiB of host, 13B actor / 7B critic, LoRA r128, ZeRO-2."""
    job = ("machine=a100-80g-8x", "machine.host_gib=500", "gpus=8", "model=llama-13b", "lora=r128", "zero=stage2")
    proc = plan_cli(ckpt_cache, "--json", *job, "loader=naive")
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert doc["machine"]["name"] == "a100-80g-8x" and doc["machine"]["device"] == "cuda" and not doc["machine"]["read_here"]
    assert doc["first_misfit"]["stage"] == "actor.load" and doc["first_misfit"]["memory"] == "host"
    assert doc["first_misfit"]["capacity_gib"] == 450.0  # 500 GiB x plan.host_fraction
    stages = [st["stage"] for st in doc["plan"]["stages"]]
    assert stages[-4:] == ["ppo1.generate", "ppo1.score", "ppo1.train_actor", "ppo1.train_critic"]
    fits = [alt for alt in doc["alternatives"] if alt["loader"]]
    assert fits and all(alt["node_peak_gib"] <= 450 and alt["gpu_need_gib"] <= 80 for alt in fits)
    table = plan_cli(ckpt_cache, *job, "loader=naive").stdout  # the same, as the table
    assert "does not fit (host)" in table and "loaders that fit:" in table and "fits: node peak" in table
    one_gpu = plan_cli(ckpt_cache, "--json", "machine=a100-80g-8x", "gpus=1", "model=llama-13b", "lora=r128", "loader=direct")
    doc = json.loads(one_gpu.stdout[one_gpu.stdout.index("{") :])
    assert doc["first_misfit"]["memory"] == "GPU" and doc["first_misfit"]["stage"].startswith(("ppo1.", "reward.", "critic."))


def test_a_job_refused_by_its_plan_generates_no_checkpoint(tmp_path: Path) -> None:
    """The plan (from the preset's config, no weights) and its fit check come before any checkpoint is generated:
    a refused job leaves no new file anywhere: no checkpoint, no probe cache, not the run dir Hydra made for it
    before the app started (its config copy and log)."""
    cache, cwd = tmp_path / "cache", tmp_path / "cwd"
    cwd.mkdir()
    cmd = [sys.executable, "-m", "rlhf_exp", "model=medium", "gpus=2", "machine.host_gib=0.5"]
    proc = subprocess.run(cmd, cwd=cwd, env=app_env(cache), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("error: plan: loader=naive needs ")
    assert not cache.exists()
    assert [p.relative_to(cwd).as_posix() for p in cwd.rglob("*")] == []
