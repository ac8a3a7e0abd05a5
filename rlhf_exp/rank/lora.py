"""LoRA adapters through peft, applied to the train roles as DeepSpeed-Chat does before initialize."""

from __future__ import annotations

from contextlib import nullcontext
from unittest import mock

import torch
from peft import LoraConfig, inject_adapter_in_model
from peft.tuners.tuners_utils import BaseTunerLayer
from torch import nn

from rlhf_exp.checkpoints.meta import is_lora_weight, lora_targets
from rlhf_exp.config.schema import LoraSettings


def apply_lora(model: nn.Module, lora: LoraSettings, device: torch.device, always_train: tuple[str, ...] = ()) -> nn.Module:
    """Inject LoRA into the target linear layers; with only_optimize_lora freeze all else.

    The adapters are created and initialised on the rank's `device`, then moved to their base layer's device and
    dtype, as peft does: on a GPU that saves the ~2.5 s per train role that CPU random init of a 7B model's 320M r=128
    adapter weights took (bench/results/h200-speed-lease1), and every loader draws the same values whatever device
    its base weights are on. Where the base weights stay on the host (naive, low_mem on a GPU rank), peft's move,
    one small synchronous copy per adapter weight, took 8.5 s per train role of the 13B/7B pair
    (bench/results/seed-2026-12-04): there the adapters go over in one copy per dtype (`move_adapters_to_base`).
    `always_train` names parameters kept trainable regardless (the critic's value head).
    """
    if not lora.enabled:
        return model
    targets = lora_targets(model, lora.target_modules)
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets)
    batched = device.type == "cuda" and base_on_host(model)
    with torch.device(device), peft_move_deferred() if batched else nullcontext():
        model = inject_adapter_in_model(config, model)
    if batched:
        move_adapters_to_base(model)
    for name, param in model.named_parameters():
        trainable = is_lora_weight(name) or any(name.startswith(p) for p in always_train)
        param.requires_grad_(trainable or not lora.only_optimize_lora)
    return model


def base_on_host(model: nn.Module) -> bool:
    """Every weight on the CPU, none partitioned by ZeRO-3 (whose weights peft gathers to place adapters)."""
    params = list(model.parameters())
    return bool(params) and all(p.device.type == "cpu" and not hasattr(p, "ds_id") for p in params)


def peft_move_deferred():
    """peft's per-adapter move to the base layer (`_move_adapter_to_device_of_base_layer`, called as each adapter is
    made) left out while injecting; `move_adapters_to_base` does it afterwards in one copy."""
    return mock.patch.object(BaseTunerLayer, "_move_adapter_to_device_of_base_layer", lambda self, *args, **kwargs: None)


def move_adapters_to_base(model: nn.Module) -> None:
    """Every adapter weight to its base layer's device and (floating) dtype, as peft's move gives it, with one copy
    per (device, dtype) pair instead of one per weight; each weight keeps a storage of its own."""
    moves: dict[tuple[torch.device, torch.device, torch.dtype], list[tuple[nn.Module, str, nn.Parameter]]] = {}
    for layer in model.modules():
        if not isinstance(layer, BaseTunerLayer):
            continue
        base = layer.get_base_layer()
        weight = getattr(base, "weight", None)
        if weight is None:
            continue
        for container_name in layer.adapter_layer_names:
            container = getattr(layer, container_name, None)
            if not isinstance(container, (nn.ModuleDict, nn.ParameterDict)):
                continue
            for owner in container.modules():
                for name, param in owner.named_parameters(recurse=False):
                    dtype = weight.dtype if param.dtype.is_floating_point and weight.dtype.is_floating_point else param.dtype
                    moves.setdefault((param.device, weight.device, dtype), []).append((owner, name, param))
    for (source, target, dtype), params in moves.items():
        if source == target and all(p.dtype == dtype for _, _, p in params):
            continue
        flat = torch.cat([p.detach().reshape(-1).to(dtype) for _, _, p in params]).to(target)
        offset = 0
        for owner, name, param in params:
            n = param.numel()
            moved = flat[offset : offset + n].view(param.shape).clone()
            offset += n
            setattr(owner, name, nn.Parameter(moved, requires_grad=param.requires_grad))


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)
