"""rank0_broadcast: only each node's local rank 0 reads the checkpoint; the others receive it.

Local rank 0 loads as `direct` does onto its device (and, as direct, every rank copies ref's and reward's weights
from the actor's and critic's engines on its GPU when it can: loaders/twin.py, nothing read or sent). The other
ranks build the model with empty weights (accelerate's init_empty_weights: parameters on the
meta device, buffers real), allocate them on their device, and receive every tensor of the state
dict by torch.distributed.broadcast within the node. The host holds one copy per node on GPU
ranks; on CPU ranks the received copies are host memory too (the host is the device).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from accelerate.utils import set_module_tensor_to_device
from torch import nn

from rlhf_exp.loaders.base import LoadRequest, empty_model, node_local_rank, node_world_size
from rlhf_exp.loaders.direct import copy_twin, load_direct

_node_group: dist.ProcessGroup | None = None


def node_group() -> tuple[dist.ProcessGroup | None, int]:
    """This node's process group (None = the default group on one node) and its first global rank."""
    global _node_group
    local_rank, local_world = node_local_rank(), node_world_size()
    src = dist.get_rank() - local_rank
    if local_world == dist.get_world_size():
        return None, src
    if _node_group is None:  # a collective: every rank creates the subgroups, once
        _node_group, _ = dist.new_subgroups(group_size=local_world)
    return _node_group, src


def _allocated_model(request: LoadRequest) -> nn.Module:
    model = empty_model(request)
    for name, param in list(model.named_parameters()):
        set_module_tensor_to_device(model, name, request.device, value=torch.empty(param.shape, dtype=param.dtype))
    model.tie_weights()  # a tied lm_head still points at the meta embedding until re-tied
    return model.to(request.device)


def load_rank0_broadcast(request: LoadRequest) -> nn.Module:
    if request.twin is not None:  # every rank decides alike (loaders/twin.py): no rank waits on a broadcast
        return copy_twin(request, request.twin)
    group, src = node_group()
    if node_local_rank() == 0:
        model = load_direct(request)
    else:
        model = _allocated_model(request)
    sent: set[int] = set()
    for tensor in model.state_dict().values():  # same keys in the same order on every rank
        if tensor.data_ptr() not in sent:  # a tied weight once
            sent.add(tensor.data_ptr())
            dist.broadcast(tensor, src=src, group=group)
    return model
