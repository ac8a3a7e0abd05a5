"""Checkpoint checks before any rank starts: readable files, shapes that match config.json, no pickled code.

Only headers are read (safetensors) or tensors memory-mapped (pickle, with weights_only=True), so
the check costs seconds even for a 13B checkpoint. Each problem is one ConfigError line naming the key.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoConfig

from rlhf_exp.checkpoints.files import VALUE_HEAD_FILE, weight_files
from rlhf_exp.checkpoints.meta import meta_model
from rlhf_exp.config.roles import CheckpointKind
from rlhf_exp.config.schema import ConfigError

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


def expected_shapes(key: str, path: Path, kind: CheckpointKind) -> Shapes:
    """What config.json says the weights are, from a model built on the meta device (no memory)."""
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError, json.JSONDecodeError) as err:
        raise ConfigError(f"{key}: {path}/config.json is unreadable ({str(err).splitlines()[0][:200]})") from None
    return {k: tuple(v.shape) for k, v in meta_model(config, kind).state_dict().items() if "rotary_emb" not in k}


def _base_name(name: str) -> str:
    return name.removeprefix("model.")


def check_checkpoint(key: str, path: Path, kind: CheckpointKind) -> None:
    """Raise ConfigError (one line, naming `key`) when the checkpoint at `path` cannot feed a `kind` model."""
    try:
        files = weight_files(path)
    except FileNotFoundError as err:
        raise ConfigError(f"{key}: {err}; valid: a directory with config.json and model*.safetensors") from None
    stored: Shapes = {}
    for f in files:
        stored.update({_base_name(k): v for k, v in file_shapes(key, f).items()})
    wanted = {_base_name(k): v for k, v in expected_shapes(key, path, kind).items()}
    if kind == "value":  # a critic may start from a causal-LM checkpoint: its lm_head is simply unused
        stored.pop("lm_head.weight", None)
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
        hidden = wanted["norm.weight"][0]
        shape = file_shapes(key, head).get("v_head.weight")
        if shape != (1, hidden):
            raise ConfigError(f"{key}: {head} has v_head.weight {shape}, the config needs {[1, hidden]}")
