"""Command-line checks that run before Hydra composes anything.

Hydra reports an unknown config-group option as a multi-line error; this turns it into one line
naming the group and its valid choices (sweeps such as loader=naive,foo included).
"""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from rlhf_exp.config.compose import compose_config, group_choices, is_group


def check_group_choices(argv: list[str]) -> str | None:
    """The first bad group choice in the overrides as a one-line message, or None."""
    candidates = [a for a in argv if "=" in a and not a.startswith("-")]
    try:
        overrides = OverridesParser.create().parse_overrides(candidates)
    except HydraException:
        return None  # malformed overrides: Hydra's own message names them
    for ov in overrides:
        group = ov.key_or_group
        if ov.package is not None or not is_group(group) or ov.is_delete():
            continue
        values = list(ov.sweep_string_iterator()) if ov.is_sweep_override() else [ov.get_value_element_as_str()]
        valid = group_choices(group)
        for value in values:
            if value not in valid:
                return f"{group}={value}: unknown {group}; valid: {', '.join(valid)}"
    return None


def check_override_keys(argv: list[str]) -> str | None:
    """The first override of a key the composed config lacks (a typo) as a one-line message, or None.

    Checked against the config composed with each group choice given (every value of a swept group)."""
    candidates = [a for a in argv if "=" in a and not a.startswith("-")]
    try:
        overrides = OverridesParser.create().parse_overrides(candidates)
    except HydraException as err:
        return f"overrides: {str(err).splitlines()[0]}"
    groups = [ov for ov in overrides if ov.package is None and is_group(ov.key_or_group) and not ov.is_delete()]
    first = {ov.key_or_group: _values(ov)[0] for ov in groups}
    variants = [first] + [{**first, ov.key_or_group: value} for ov in groups for value in _values(ov)[1:]]
    configs = [compose_config([f"{group}={value}" for group, value in variant.items()]) for variant in variants]
    for ov in overrides:
        key = ov.key_or_group
        if ov.is_add() or ov.is_force_add() or ov.is_delete() or key.startswith("hydra") or is_group(key):
            continue
        if not any(_has_key(cfg, key) for cfg in configs):
            return f"{key}: not a key of this config; valid: a key `python -m rlhf_exp --help` lists, or +{key}=... to add one"
    return None


def _values(ov: Override) -> list[str]:
    return list(ov.sweep_string_iterator()) if ov.is_sweep_override() else [ov.get_value_element_as_str()]


def _has_key(cfg: DictConfig, key: str) -> bool:
    """Whether the config has this dotted key (a ??? value counts: it is there, waiting to be set)."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return isinstance(node, DictConfig) and leaf in node.keys()


def check_output_dir(argv: list[str]) -> str | None:
    """Whether the run or sweep directory can be created, as a one-line message naming the key, or None.

    Hydra creates it before any of our code runs and reports a failure as a traceback. Only the
    literal part before any `${...}` interpolation is created here (Hydra makes the rest).
    """
    multirun = any(a in ("-m", "--multirun") for a in argv)
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = next((a.split("=", 1)[1] for a in argv if a.startswith(f"{key}=")), "outputs/")
    literal = Path(given.split("${", 1)[0] or ".")
    try:
        literal.mkdir(parents=True, exist_ok=True)
        probe = literal / f".rlhf_exp_write_probe_{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as err:
        return f"{key}: cannot write {literal}: {err.strerror or err}; valid: a directory you can write"
    return None
