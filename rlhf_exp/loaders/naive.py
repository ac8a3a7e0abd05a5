"""naive: DeepSpeed-Chat's 2023 loading, on every rank at once.

transformers 4.x from_pretrained (low_cpu_mem_usage=False) and DeepSpeed-Chat's critic path both
built the whole model in fp32 (random init), then read a full private state-dict copy, then
copied it in: ~3 x checkpoint of host memory per rank (DeepSpeedExamples issue 529). transformers 5
no longer does this, so it is spelled out here.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig

from rlhf_exp.loaders.base import LoadRequest, model_class
from rlhf_exp.loaders.state_dict import load_into, read_private_state_dict


def load_naive(request: LoadRequest) -> nn.Module:
    config = AutoConfig.from_pretrained(request.checkpoint)
    model = model_class(request).from_config(config, dtype=torch.float32)  # no dtype given in 2023: fp32
    state = read_private_state_dict(request.checkpoint)
    load_into(model, state)
    del state
    return model
