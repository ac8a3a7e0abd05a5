"""Checkpoint checks before any rank starts: readable files, shapes that match config.json, no pickled code.

Only headers are read (safetensors) or tensors memory-mapped (pickle, with weights_only=True), so
the check costs seconds even for a 13B checkpoint. Each problem is one ConfigError line naming the key.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open

from rlhf_exp.checkpoints.architecture import supported_config
from rlhf_exp.checkpoints.files import VALUE_HEAD_FILE, weight_files
from rlhf_exp.checkpoints.meta import base_name, checkpoint_key_mapper, meta_model, value_head_width, weight_shapes
from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.roles import CheckpointKind

Shapes = dict[str, tuple[int, ...]]


def file_shapes(key: str, f: Path) -> Shapes:
    """Tensor shapes stored in one weight file."""
    if f.suffix == ".safetensors":
        try:
            with safe_open(str(f), "pt") as handle:
                return {k: tuple(handle.get_slice(k).get_shape()) for k in handle.keys()}  # noqa: SIM118 - not a dict
        except Exception as err:  # safetensors raises its own error types for a bad header
            raise ConfigError(f"{key}: {f} is not a readable safetensors file ({str(err).splitlines()[0]})") from None
    try:
        state = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"(unsupported|Unsupported global:) GLOBAL [^\n]*", str(err))  # the object it would have built
        first = found.group(0) if found else str(err).strip().splitlines()[0][:200]
        raise ConfigError(f"{key}: {f} holds more than tensors, refused (weights_only=True): {first}") from None
    except (RuntimeError, EOFError, OSError) as err:
        raise ConfigError(f"{key}: {f} is not a readable torch checkpoint ({str(err).splitlines()[0][:200]})") from None
    return {k: tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}


def expected_shapes(key: str, path: Path, kind: CheckpointKind) -> tuple[Shapes, Callable[[str], str], int]:
    """What config.json says the weights are (base-model names), how the file's names map to them, and the value
    head's width: from a model built on the meta device (no memory)."""
    config = supported_config(key, path)
    model = meta_model(config, kind)
    wanted = {base_name(model, k): v for k, v in weight_shapes(model).items()}
    to_model = checkpoint_key_mapper(model)
    return wanted, lambda name: base_name(model, to_model(name)), value_head_width(config)


def check_checkpoint(key: str, path: Path, kind: CheckpointKind) -> None:
    """Raise ConfigError (one line, naming `key`) when the checkpoint at `path` cannot feed a `kind` model.

    Tied weights (lm_head sharing the embedding) are expected once; a critic may start from a causal-LM
    checkpoint (its lm_head is simply unused)."""
    wanted, to_wanted, head_width = expected_shapes(key, path, kind)
    try:
        files = weight_files(path)
    except FileNotFoundError as err:
        raise ConfigError(f"{key}: {err}; valid: a directory with config.json and model*.safetensors") from None
    stored: Shapes = {}
    for f in files:
        stored.update({to_wanted(k): v for k, v in file_shapes(key, f).items()})
    missing = sorted(set(wanted) - set(stored))
    if missing:
        raise ConfigError(f"{key}: {path} lacks {len(missing)} weights its config.json needs, e.g. {missing[0]}")
    for name, shape in wanted.items():
        if stored[name] != shape:
            raise ConfigError(
                f"{key}: {path} does not match its config.json: {name} is {list(stored[name])} in the file, "
                f"{list(shape)} by the config"
            )
    head = path / VALUE_HEAD_FILE
    if kind == "value" and head.exists():
        shape = file_shapes(key, head).get("v_head.weight")
        if shape != (1, head_width):
            raise ConfigError(f"{key}: {head} has v_head.weight {shape}, the config needs {[1, head_width]}")
