"""machine.emulate on CPU ranks: the target's host memory as the job's cap, by the job's own memory cgroup where this
host allows one and by the watchdog otherwise; an out-of-memory inside the cap fails the job at the stage the plan
names, and the result, the table and the report say the job was emulated and at what caps."""

from __future__ import annotations

from pathlib import Path

from conftest import run_sweep_in

from rlhf_exp.config.stages import job_stages

STAGES = job_stages(ppo_steps=1)


def test_a_job_over_the_emulated_host_cap_fails_at_the_stage_its_plan_names(tmp_path: Path, ckpt_cache: Path) -> None:
    # medium at 2 ranks: naive's fp32 copies pass 1.35 GiB (1.5 x plan.host_fraction) in actor.load, by the plan too
    overrides = ("model=medium", "gpus=2", "machine.host_gib=1.5", "machine.emulate=true", "plan.fit_check=false")
    proc, results = run_sweep_in(tmp_path / "sweep", ckpt_cache, "machine.emulate_host_with=auto,watchdog", *overrides)
    assert proc.returncode == 1, proc.stderr[-3000:]
    auto, watchdog = results
    for result in results:
        assert result["status"] == "failed" and result["plan"]["fits"] is False
        assert result["emulation"]["host"]["cap_gib"] == 1.35 and result["emulation"]["gpu"] is None
    named = result["plan"]["first_misfit"]["stage"]
    assert named == "actor.load" and result["plan"]["first_misfit"]["memory"] == "host"
    if auto["emulation"]["host"]["by"].startswith("cgroup"):  # the kernel's OOM killer, inside the job's cgroup
        assert auto["emulation"]["host"]["oom_kills"] >= 1
        assert auto["failure"]["stage"] == named and auto["failure"]["signal"] == "SIGKILL"
        assert auto["failure"]["reason"].startswith("the kernel's OOM killer inside the emulated host cap (1.35 GiB, cgroup")
    else:  # this host allows no cgroup of the job's own
        assert auto["emulation"]["host"]["by"] == "watchdog"
    # the watchdog reads the node-wide figure, which the machine's other work moves either way, and the ranks' own
    # Σ Pss_Anon, which only the job moves: the larger of the two never trips later than the plan
    assert watchdog["emulation"]["host"]["by"] == "watchdog" and watchdog["failure"]["process"] == "watchdog"
    assert "emulated host: the job's " in watchdog["failure"]["reason"]  # node memory rose, or its ranks held
    assert STAGES.index(watchdog["failure"]["stage"]) <= STAGES.index(named)
    assert "emulated" in proc.stdout and "local: host 1.35 (watchdog)" in proc.stdout  # the sweep table's column
    assert "emulated local: host 1.35" in (tmp_path / "sweep" / "report.html").read_text()


def test_a_job_inside_the_emulated_caps_completes_and_says_so(tmp_path: Path, ckpt_cache: Path) -> None:
    overrides = ("machine=a100-80g-8x", "machine.host_gib=8", "machine.emulate=true", "gpus=2", "wandb.mode=disabled")
    proc, (result,) = run_sweep_in(tmp_path / "sweep", ckpt_cache, "seed=0", *overrides)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result["status"] == "completed"
    emulation = result["emulation"]
    assert emulation["machine"] == "a100-80g-8x" and emulation["host"]["cap_gib"] == 7.2
    assert emulation["host"]["oom_kills"] == 0 and not emulation["host"]["above_this_host"]
    assert emulation["gpu"] == {"cap_gib": 79.15, "by": "not enforced: the ranks run on the CPU"}  # the preset's gpu_gib
    assert "emulated a100-80g-8x: host 7.2" in proc.stdout
