"""Sweeps through a real SLURM (started by .ci/run): per-job resources, results in the sweep dir, failures recorded."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import run_sweep_in

pytestmark = pytest.mark.skipif(
    shutil.which("sbatch") is None or "SLURM_CONF" not in os.environ, reason="no SLURM cluster (.ci/run starts one)"
)
LAUNCH = (
    "hydra/launcher=rlhf_slurm",
    "device=cpu",
    "hydra.launcher.request_gpus=true",
    "hydra.launcher.mem_gb=3",
    "hydra.launcher.gpus_per_node_max=4",
    "hydra.launcher.timeout_min=15",
)


def slurm_jobs(submitit_folder: Path, settle_s: float = 60) -> dict[str, dict[str, str]]:
    """sacct's record of the sweep's jobs, once each has left RUNNING/COMPLETING (rank 0 returns a bit earlier)."""
    ids = sorted({p.name.split("_")[0] for p in submitit_folder.glob("*_submitted.pkl")})
    cmd = ["sacct", "-X", "-n", "-P", "-o", "JobID,JobName,State,AllocTRES", "-j", ",".join(ids)]
    deadline = time.time() + settle_s
    while True:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows = [line.split("|") for line in out.splitlines() if line]
        settled = all(state not in ("RUNNING", "COMPLETING", "PENDING") for _, _, state, _ in rows)
        if settled or time.time() > deadline:
            return {name: {"id": jid, "state": state, "tres": tres} for jid, name, state, tres in rows}
        time.sleep(1)


@pytest.mark.slow
def test_each_job_gets_its_own_tasks_and_gpus(tmp_path: Path, ckpt_cache: Path) -> None:
    sweep = tmp_path / "sweep"
    proc, results = run_sweep_in(sweep, ckpt_cache, *LAUNCH, "gpus=1,2", f"hydra.launcher.submitit_folder={sweep}/.submitit")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [(r["gpus"], r["status"], r["launcher"]) for r in results] == [(1, "completed", "slurm"), (2, "completed", "slurm")]
    for r in results:
        assert all(row["ranks_done"] == r["gpus"] for row in r["stages"])
    jobs = slurm_jobs(sweep / ".submitit")
    assert jobs["rlhf_exp_0"]["state"] == jobs["rlhf_exp_1"]["state"] == "COMPLETED"
    assert "gres/gpu=1" in jobs["rlhf_exp_0"]["tres"] and "gres/gpu=2" in jobs["rlhf_exp_1"]["tres"]


@pytest.mark.slow
def test_a_killed_rank_fails_its_job_and_the_sweep_returns(tmp_path: Path, ckpt_cache: Path) -> None:
    sweep = tmp_path / "sweep"
    proc, results = run_sweep_in(
        sweep,
        ckpt_cache,
        *LAUNCH,
        "gpus=2",
        "fault.stage=critic.load",
        "fault.rank=1",
        "fault.mode=kill",
        f"hydra.launcher.submitit_folder={sweep}/.submitit",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = results
    assert result["status"] == "failed"
    assert result["failure"]["rank"] == 1 and result["failure"]["stage"] == "critic.load"
    assert "SLURM job" in result["failure"]["reason"]
    assert [row["stage"] for row in result["stages"] if row["status"] == "ok"][:5] == [
        "dist_init",
        "actor.load",
        "actor.init",
        "ref.load",
        "ref.init",
    ]
    assert slurm_jobs(sweep / ".submitit")["rlhf_exp_0"]["state"] in {"FAILED", "CANCELLED", "NODE_FAIL"}
