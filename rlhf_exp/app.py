"""The Hydra entry point: `python -m rlhf_exp [overrides]` or `-m` for a sweep."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rlhf_exp.cli_checks import CONF_DIR, check_group_choices, check_output_dir
from rlhf_exp.settings import ConfigError, validate
from rlhf_exp.tracking import make_tracker


def fail_config(err: ConfigError) -> None:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def hydra_app(cfg: DictConfig) -> str:
    try:
        validate(cfg)  # the schema first: a typo costs no torch import
    except ConfigError as err:
        fail_config(err)
    from rlhf_exp.job import run_job  # torch and friends: seconds to import
    from rlhf_exp.slurm_task import ranks_are_slurm_tasks, run_as_slurm_task

    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    labels = {
        "group": Path(hydra_cfg.sweep.dir).name if hydra_cfg.mode == RunMode.MULTIRUN else f"run-{job_dir.name}",
        "name": job_dir.name,
        "zero": hydra_cfg.runtime.choices.get("zero", "?"),
        "model": hydra_cfg.runtime.choices.get("model", "?"),
    }
    tracker = make_tracker(cfg.wandb.mode, cfg.wandb.project, cfg.wandb.entity)
    if ranks_are_slurm_tasks():  # submitted by the rlhf_slurm launcher: this process is one rank
        result = run_as_slurm_task(cfg, job_dir, tracker, labels)
        return result["status"] if result else "rank"
    try:
        result = run_job(cfg, job_dir, tracker, labels)
    except ConfigError as err:
        fail_config(err)
    if result["status"] != "completed" and hydra_cfg.mode == RunMode.RUN:
        sys.exit(1)  # in a sweep a failed job is recorded and the sweep goes on
    return result["status"]


def main() -> None:
    if sys.argv[1:2] == ["plan"]:
        from rlhf_exp.plan_cli import main as plan_main

        sys.exit(plan_main(sys.argv[2:]))
    bad = check_group_choices(sys.argv[1:]) or check_output_dir(sys.argv[1:])
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        sys.exit(2)
    hydra_app()
