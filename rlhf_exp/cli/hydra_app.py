"""The Hydra application: one call per job of `python -m rlhf_exp [overrides]` (or each job of a `-m` sweep)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rlhf_exp.config.compose import CONF_DIR, CONFIG_NAME
from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.schema import settings_of, to_plain
from rlhf_exp.job.interrupt import INTERRUPTED_EXIT
from rlhf_exp.job.result import record_config_error
from rlhf_exp.jobdir import JobDir
from rlhf_exp.report.tracking import make_tracker, sync_hint


def fail_config(err: ConfigError, job_dir: Path) -> None:
    """A refused single run: one line, and the run dir Hydra made for it removed (nothing else was written)."""
    print(f"error: {err}", file=sys.stderr)
    for handler in logging.getLogger().handlers[:]:  # Hydra's job.log handler holds the file open
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == job_dir:
            handler.close()
            logging.getLogger().removeHandler(handler)
    JobDir(job_dir).discard_if_only_hydra(Path.cwd())
    sys.exit(2)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name=CONFIG_NAME)
def hydra_app(cfg: DictConfig) -> str:
    logging.captureWarnings(True)  # library warnings to the job's log file (Hydra's job_logging), not the console
    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    config = None  # the composed config as plain data: resolved once, here, and passed down with the settings
    try:
        config = to_plain(cfg)
        settings = settings_of(config)  # the schema first: a typo costs no torch import
        from rlhf_exp.job.driver import run_job  # torch and friends: seconds to import

        labels = {
            "group": Path(hydra_cfg.sweep.dir).name if multirun else f"run-{job_dir.name}",
            "name": job_dir.name,
            "zero": hydra_cfg.runtime.choices.get("zero", "?"),
            "model": hydra_cfg.runtime.choices.get("model", "?"),
        }
        tracker = make_tracker(settings.wandb.mode, settings.wandb.project, settings.wandb.entity)
        result = run_job(settings, config, job_dir, tracker, labels, "hydra.sweep.dir" if multirun else "hydra.run.dir")
    except ConfigError as err:
        if not multirun:
            fail_config(err, job_dir)
        print(f"error: {err}", file=sys.stderr)  # in a sweep the job is recorded as failed and the sweep goes on
        record_config_error(JobDir(job_dir), err, config)
        return "failed"
    if result is None:
        return "node"  # a SLURM node other than the first: node 0 holds the result
    if not multirun and (hint := sync_hint(job_dir)):
        print(hint)
    if result["status"] == "interrupted":
        print(f"interrupted at {(result.get('failure') or {}).get('stage')}: {result.get('result_file')}", file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT)  # stops the sweep too: its later jobs are not started
    if result["status"] != "completed" and not multirun:
        sys.exit(1)  # in a sweep a failed job is recorded and the sweep goes on
    return result["status"]
