"""The one interface every loading strategy implements, and what it is handed."""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from accelerate import init_empty_weights
from torch import nn
from transformers import AutoConfig
from transformers.initialization import no_init_weights

from rlhf_exp.checkpoints.meta import model_class
from rlhf_exp.config.roles import CheckpointKind
from rlhf_exp.loaders.state_dict import assign_weights


@dataclass(frozen=True)
class LoadRequest:
    role: str  # actor | ref | critic | reward
    kind: CheckpointKind  # causal_lm (actor/ref) or value (critic/reward: base model, head added later)
    checkpoint: Path
    dtype: torch.dtype  # the engine's dtype (fp32 for naive: that is its point)
    device: torch.device  # this rank's device
    ds_config: dict[str, Any]  # the role's DeepSpeed config (for partitioned loading)
    group_size: int = 1  # ranks loading at once, for strategies that take turns
    fast_read: bool = True  # see LoaderSettings
    read_threads: int = 2  # fast_read's threads (LoaderSettings.threads_per_rank)
    chunk_bytes: int = 16 << 20
    twin: nn.Module | None = None  # an earlier role's base model to copy on the device (loaders/twin.py)


class Loader(Protocol):
    """Builds a role's base model with the checkpoint's weights in it."""

    def __call__(self, request: LoadRequest) -> nn.Module: ...


LOCAL_RANK_VAR = "RLHF_EXP_LOCAL_RANK"  # the node-local rank when LOCAL_RANK was repointed at a shared GPU


def node_local_rank() -> int:
    """This rank's index among the ranks of its node."""
    return int(os.environ.get(LOCAL_RANK_VAR, os.environ.get("LOCAL_RANK", 0)))


def node_world_size() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", 1))


def uninitialised_model(request: LoadRequest, dtype: torch.dtype, on_meta: bool) -> nn.Module:
    """The role's model built from its config.json without weight init (the checkpoint fills every weight):
    parameters on the meta device (nothing allocated) or allocated and untouched; buffers real either way (rotary
    tables are computed in __init__, not loaded)."""
    config = AutoConfig.from_pretrained(request.checkpoint)
    with no_init_weights(), init_empty_weights() if on_meta else nullcontext():
        model = model_class(request.kind).from_config(config, dtype=dtype)
    model.tie_weights()  # transformers ties inside init_weights, which no_init_weights skips
    return model


def empty_model(request: LoadRequest) -> nn.Module:
    """The role's model in the engine dtype, its parameters on the meta device."""
    return uninitialised_model(request, request.dtype, on_meta=True)


def model_of(request: LoadRequest, state: dict[str, torch.Tensor]) -> nn.Module:
    """The role's model built on the meta device, `state`'s tensors (already on the rank's device) its weights."""
    model = empty_model(request)
    assign_weights(model, state)
    return model.to(request.device).eval()  # buffers follow; eval() as from_pretrained returns it
