"""Reading checkpoint weights into state dicts and matching their keys to a model."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load as load_safetensors_bytes
from torch import nn

from rlhf_exp.checkpoints.files import weight_files
from rlhf_exp.checkpoints.meta import checkpoint_key_mapper, weight_shapes


def read_private_state_dict(checkpoint: Path) -> dict[str, torch.Tensor]:
    """Every tensor copied into this process's private memory, as 2023's torch.load(pytorch_model.bin) did.

    Reading the bytes first (rather than memory-mapping) is the point: it is the private,
    per-rank copy that made every rank pay for the whole checkpoint.
    """
    state: dict[str, torch.Tensor] = {}
    for f in weight_files(checkpoint):
        if f.suffix == ".bin":  # pickle: tensors only, never arbitrary objects
            state.update(torch.load(f, map_location="cpu", weights_only=True))
        else:
            state.update(load_safetensors_bytes(f.read_bytes()))
    return state


def match_keys(state: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """Rename checkpoint keys to the model's as transformers' own loading does (checkpoints/meta.py)."""
    to_model = checkpoint_key_mapper(model)
    return {to_model(k): v for k, v in state.items()}


def _check_missing(stored: dict[str, tuple[int, ...]], missing_keys: list[str]) -> None:
    missing = [k for k in missing_keys if k in stored]
    if missing:
        raise KeyError(f"checkpoint lacks {len(missing)} weights of the model, e.g. {missing[:3]}")


def load_into(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """load_state_dict that fails loudly when a model weight is absent from the checkpoint (a tied weight,
    such as an lm_head sharing the embedding, is filled through the weight it is tied to)."""
    stored = weight_shapes(model)
    _check_missing(stored, model.load_state_dict(match_keys(state, model), strict=False).missing_keys)


def assign_weights(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """The checkpoint's tensors become the model's parameters (a meta-device model: nothing copied); tied
    weights are re-tied to the one the checkpoint holds."""
    stored = weight_shapes(model)  # before assigning: a tied weight counts once
    _check_missing(stored, model.load_state_dict(match_keys(state, model), strict=False, assign=True).missing_keys)
    model.tie_weights()
    left = [name for name, param in model.named_parameters() if param.is_meta]
    if left:
        raise KeyError(f"checkpoint lacks {len(left)} weights of the model, e.g. {left[:3]}")
