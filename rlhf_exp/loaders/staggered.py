"""staggered: naive loading, but the ranks of a node take turns in groups of `group_size`.

Each group builds its fp32 model and reads the checkpoint, then casts its parameters to the engine
dtype and moves the weights to its device (what deepspeed.initialize would do next) before the next group
starts, so the node's transient peak is one group's instead of every rank's.
"""

from __future__ import annotations

import gc
import math

import torch.distributed as dist
from torch import nn

from rlhf_exp.loaders.base import LoadRequest, node_local_rank, node_world_size
from rlhf_exp.loaders.naive import load_naive
from rlhf_exp.memory.heap import release_freed_heap


def load_staggered(request: LoadRequest) -> nn.Module:
    local_rank, local_world = node_local_rank(), node_world_size()
    my_turn = local_rank // request.group_size
    model: nn.Module | None = None
    for turn in range(math.ceil(local_world / request.group_size)):
        if turn == my_turn:
            model = load_naive(request)
            # cast and moved one parameter at a time, as deepspeed.initialize casts before it moves: the device never
            # holds the fp32 model (moved whole first, the 13B actor took 48.8 GiB of the GPU at actor.load,
            # bench/results/seed-2026-12-05); parameters only: fp32 buffers (rotary inv_freq) stay fp32 for RoPE
            for param in model.parameters():
                param.data = param.data.to(device=request.device, dtype=request.dtype)
            model.to(device=request.device)  # the buffers
            gc.collect()
            release_freed_heap()  # the freed fp32 model leaves the node's used memory before the next group loads
        if dist.is_initialized():
            dist.barrier()  # the next group starts only when this one's weights are off the host
    assert model is not None
    return model
