"""naive: DeepSpeed-Chat's 2023 loading, on every rank at once.

transformers 4.x from_pretrained (low_cpu_mem_usage=False) and DeepSpeed-Chat's critic path both
built the whole model in fp32, then read a full private state-dict copy, then copied it in:
~3 x checkpoint of host memory per rank (DeepSpeedExamples issue 529). transformers 5 no longer does
this, so it is spelled out here.

The fp32 model is allocated and zero-filled rather than randomly initialised: the checkpoint overwrites
every weight, so random init (minutes at 7B+, single-threaded) changes no figure, while the fill keeps
every fp32 page resident before the read starts, as the init did (`python -m bench run naive-init` compares the two).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig

from rlhf_exp.checkpoints.meta import model_class
from rlhf_exp.loaders.base import LoadRequest, uninitialised_model
from rlhf_exp.loaders.state_dict import load_into, read_private_state_dict


def fp32_model(request: LoadRequest, random_init: bool = False) -> nn.Module:
    """The role's model in fp32 with every page written: zeros, or (random_init) the library's own init."""
    if random_init:
        config = AutoConfig.from_pretrained(request.checkpoint)
        return model_class(request.kind).from_config(config, dtype=torch.float32)
    model = uninitialised_model(request, torch.float32, on_meta=False)  # no dtype given in 2023: fp32
    with torch.no_grad():
        for param in model.parameters():
            param.zero_()  # a multi-threaded memset: the pages are resident, as after an init
    return model


def load_naive(request: LoadRequest, random_init: bool = False) -> nn.Module:
    model = fp32_model(request, random_init)
    state = read_private_state_dict(request.checkpoint)
    load_into(model, state)
    del state
    return model
