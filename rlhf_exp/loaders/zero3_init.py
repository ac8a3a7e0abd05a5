"""zero3_init: the partitioned load, as DeepSpeed-Chat does under ZeRO-3.

A live HfDeepSpeedConfig during from_pretrained makes transformers build the model inside
deepspeed.zero.Init, so every parameter is partitioned across ranks as it is loaded and no rank
ever holds the whole model. Valid only with ZeRO-3 (checked before ranks start).
"""

from __future__ import annotations

from torch import nn
from transformers.integrations import HfDeepSpeedConfig

from rlhf_exp.config.deepspeed import zero_stage
from rlhf_exp.loaders.base import LoadRequest, model_class


def load_zero3_init(request: LoadRequest) -> nn.Module:
    if zero_stage(request.ds_config) != 3:
        raise ValueError(f"zero3_init needs ZeRO-3, {request.role} has stage {zero_stage(request.ds_config)}")
    dschf = HfDeepSpeedConfig(request.ds_config)  # noqa: F841 - must stay alive during from_pretrained
    return model_class(request).from_pretrained(request.checkpoint, dtype=request.dtype)
