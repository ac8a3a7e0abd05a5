"""zero3_init: the partitioned load, as DeepSpeed-Chat does under ZeRO-3.

A live HfDeepSpeedConfig makes transformers build the model inside deepspeed.zero.Init, so every parameter is
partitioned across ranks as it is made and no rank ever holds the whole model. Valid only with ZeRO-3 (checked
before ranks start). Two ways to fill the partitions:
- loader.fast_read=true (default): each rank reads its own share of every tensor from the memory-mapped
  safetensors and copies it into its partition (`fill_partitions`): no collective at all. zero.Init's own broadcast of
  rank 0's fresh (unfilled) values is skipped (`PartitionWithoutBroadcast`): every partition is overwritten anyway,
  and at 8 ranks sharing a GPU (gloo) those broadcasts were 81 s of rank 0's load stages, staged through pinned host
  buffers that stayed in each rank (bench/results/zero3-profile-2026-12-05).
- loader.fast_read=false: from_pretrained, the library's path: per module, every rank gathers the whole
  parameters, rank 0 copies the checkpoint tensor in, broadcasts it, and each rank partitions again. At 8 ranks
  sharing a GPU (gloo) the gathers and broadcasts were 208 of rank 0's 301 s (bench/results/zero3-profile-2026-12-04).
The weights are the same bytes either way (tests/e2e/test_families.py compares them with naive's).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import deepspeed
import torch
import torch.distributed as dist
from safetensors import safe_open
from torch import nn
from transformers import AutoConfig
from transformers.integrations import HfDeepSpeedConfig
from transformers.integrations.deepspeed import deepspeed_config
from transformers.models.auto.auto_factory import _get_model_class
from transformers.utils.generic import ContextManagers

from rlhf_exp.checkpoints.files import weight_files
from rlhf_exp.checkpoints.meta import checkpoint_key_mapper, model_class
from rlhf_exp.config.deepspeed import zero_stage
from rlhf_exp.loaders.base import LoadRequest


def load_zero3_init(request: LoadRequest) -> nn.Module:
    if zero_stage(request.ds_config) != 3:
        raise ValueError(f"zero3_init needs ZeRO-3, {request.role} has stage {zero_stage(request.ds_config)}")
    dschf = HfDeepSpeedConfig(request.ds_config)  # noqa: F841 - must stay alive while the model is built
    files = weight_files(request.checkpoint)
    if not request.fast_read or not all(f.suffix == ".safetensors" for f in files):
        return model_class(request.kind).from_pretrained(request.checkpoint, dtype=request.dtype)
    model = partitioned_model(request)
    fill_partitions(model, files)
    return model.eval()


def partitioned_model(request: LoadRequest) -> nn.Module:
    """The role's model made inside deepspeed.zero.Init exactly as from_pretrained makes it (transformers' own init
    contexts: no weight init, RoPE tables in their dtype), its partitions allocated and not yet filled."""
    config = AutoConfig.from_pretrained(request.checkpoint)
    config.dtype = request.dtype
    cls = _get_model_class(config, model_class(request.kind)._model_mapping)
    with ContextManagers(init_contexts(cls, request.dtype, config)):
        model = cls(config)
    model.tie_weights()  # as from_pretrained does after loading (a tied lm_head is the embedding's parameter)
    return model


def init_contexts(cls: type, dtype: torch.dtype, config: object) -> list:
    """from_pretrained's own contexts for making a model (not quantized, zero.Init not yet entered), its zero.Init
    swapped for one that does not broadcast. The method's signature moves between minor versions: 5.25 added
    `config`."""
    optional = {"config": config} if "config" in inspect.signature(cls.get_init_context).parameters else {}
    contexts = cls.get_init_context(dtype, False, False, None, **optional)
    no_broadcast = PartitionWithoutBroadcast(config_dict_or_path=deepspeed_config())
    return [no_broadcast if isinstance(c, deepspeed.zero.Init) else c for c in contexts]


class PartitionWithoutBroadcast(deepspeed.zero.Init):
    """zero.Init that partitions each new parameter without first broadcasting rank 0's copy to every rank
    (DeepSpeed 0.19's `_zero_init_param` is convert, broadcast, partition): the values are not initialised (transformers'
    no_init_weights) and fill_partitions overwrites every partition from the checkpoint."""

    def _zero_init_param(self, param: nn.Parameter) -> None:
        self._convert_to_deepspeed_param(param)
        param.partition()


def fill_partitions(model: nn.Module, files: list[Path]) -> None:
    """Each partitioned parameter's share of the checkpoint into this rank's partition, read from the mapped file:
    only the rows that hold the share are touched. Persistent buffers (not partitioned) whole."""
    to_model = checkpoint_key_mapper(model)
    params = dict(model.named_parameters())  # a tied weight once
    buffers = dict(model.named_buffers())
    missing = set(params)
    with torch.no_grad():
        for path in files:
            with safe_open(path, framework="pt", device="cpu") as f:
                for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                    name = to_model(key)
                    if name in params:
                        fill_one(params[name], f.get_slice(key))
                        missing.discard(name)
                    elif name in buffers:
                        buffers[name].copy_(f.get_tensor(key))
    if missing:
        raise KeyError(f"checkpoint lacks {len(missing)} weights of the model, e.g. {sorted(missing)[:3]}")


def fill_one(param: nn.Parameter, stored: object) -> None:
    """DeepSpeed's partition layout (partition_parameters.py `_partition_param`): the flattened tensor padded to a
    multiple of the partition count, rank r holding elements [r * size, (r + 1) * size)."""
    part = param.ds_tensor
    size = part.ds_numel
    start = size * dist.get_rank(group=param.ds_process_group)
    count = max(0, min(size, param.ds_numel - start))
    if count:
        shape = stored.get_shape()  # type: ignore[attr-defined]
        row = 1
        for dim in shape[1:]:
            row *= dim
        if shape:  # the rows holding [start, start + count) only
            first, last = start // row, -(-(start + count) // row)
            block = stored[first:last].reshape(-1)  # type: ignore[index]
            share = block[start - first * row : start - first * row + count]
        else:
            share = stored[:].reshape(-1)  # type: ignore[index]
        part[:count].copy_(share)
    part[count:].zero_()  # the padding (DeepSpeed leaves it as allocated)
