"""The Hydra application: one call per job of `python -m rlhf_exp [overrides]` (or each job of a `-m` sweep)."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rlhf_exp.config.compose import CONF_DIR, CONFIG_NAME
from rlhf_exp.config.schema import ConfigError, validate
from rlhf_exp.report.tracking import make_tracker


def fail_config(err: ConfigError) -> None:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name=CONFIG_NAME)
def hydra_app(cfg: DictConfig) -> str:
    try:
        validate(cfg)  # the schema first: a typo costs no torch import
    except ConfigError as err:
        fail_config(err)
    from rlhf_exp.job.driver import run_job  # torch and friends: seconds to import

    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    labels = {
        "group": Path(hydra_cfg.sweep.dir).name if multirun else f"run-{job_dir.name}",
        "name": job_dir.name,
        "zero": hydra_cfg.runtime.choices.get("zero", "?"),
        "model": hydra_cfg.runtime.choices.get("model", "?"),
    }
    tracker = make_tracker(cfg.wandb.mode, cfg.wandb.project, cfg.wandb.entity)
    try:
        result = run_job(cfg, job_dir, tracker, labels)
    except ConfigError as err:
        fail_config(err)
    if result is None:
        return "node"  # a SLURM node other than the first: node 0 holds the result
    if result["status"] != "completed" and not multirun:
        sys.exit(1)  # in a sweep a failed job is recorded and the sweep goes on
    return result["status"]
