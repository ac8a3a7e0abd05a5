"""The one interface every loading strategy implements, and what it is handed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from rlhf_exp.checkpoints import CheckpointKind


@dataclass(frozen=True)
class LoadRequest:
    role: str  # actor | ref | critic | reward
    kind: CheckpointKind  # causal_lm (actor/ref) or value (critic/reward: base model, head added later)
    checkpoint: Path
    dtype: torch.dtype  # the engine's dtype (fp32 for naive: that is its point)
    device: torch.device  # this rank's device
    ds_config: dict[str, Any]  # the role's DeepSpeed config (for partitioned loading)
    group_size: int = 1  # ranks loading at once, for strategies that take turns


class Loader(Protocol):
    """Builds a role's base model with the checkpoint's weights in it."""

    def __call__(self, request: LoadRequest) -> nn.Module: ...
