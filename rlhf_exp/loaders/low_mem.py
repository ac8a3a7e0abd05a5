"""low_mem: transformers 5 from_pretrained in the engine dtype: the model is built on the meta device and filled from
memory-mapped safetensors, with no fp32 copy and no private read of the whole file."""

from __future__ import annotations

from torch import nn

from rlhf_exp.checkpoints.meta import model_class
from rlhf_exp.loaders.base import LoadRequest


def load_low_mem(request: LoadRequest) -> nn.Module:
    return model_class(request.kind).from_pretrained(request.checkpoint, dtype=request.dtype)
