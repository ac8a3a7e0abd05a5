"""Where the Hydra configs live (inside the package, so an installed wheel composes them) and their groups."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

CONF_DIR = Path(str(files("rlhf_exp.config") / "conf"))
CONFIG_NAME = "config"
GROUPS = ("model", "zero", "lora", "loader", "machine")  # the config groups a user picks from


def config_digest(overrides: str) -> str:
    """A short digest of a job's overrides: sweep job dirs are unique per config (conf/config.yaml's subdir)."""
    return hashlib.sha256(overrides.encode()).hexdigest()[:8]


OmegaConf.register_new_resolver("rlhf_exp.digest", config_digest, replace=True)


def group_choices(group: str) -> list[str]:
    """A group's options; files starting with `_` are shared parts, not choices."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml") if not p.stem.startswith("_"))


def is_group(name: str) -> bool:
    return (CONF_DIR / name).is_dir()


def compose_config(overrides: list[str]) -> DictConfig:
    """The composed app config, in-process (no Hydra run dir, no job)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(CONFIG_NAME, overrides=overrides)
