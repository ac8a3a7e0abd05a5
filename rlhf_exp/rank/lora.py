"""LoRA adapters through peft, applied to the train roles as DeepSpeed-Chat does before initialize."""

from __future__ import annotations

import torch
from peft import LoraConfig, inject_adapter_in_model
from torch import nn

from rlhf_exp.checkpoints.meta import is_lora_weight, lora_targets
from rlhf_exp.config.schema import LoraSettings


def apply_lora(model: nn.Module, lora: LoraSettings, device: torch.device, always_train: tuple[str, ...] = ()) -> nn.Module:
    """Inject LoRA into the target linear layers; with only_optimize_lora freeze all else.

    The adapters are created and initialised on the rank's `device`, then moved by peft to their base layer's
    device: on a GPU that saves the ~2.5 s per train role that CPU random init of a 7B model's 320M r=128 adapter
    weights took (the injection's own Python, ~0.5 s, remains; bench/results/h200-speed-lease1), and every loader
    draws the same values whatever device its base weights are on.
    `always_train` names parameters kept trainable regardless (the critic's value head).
    """
    if not lora.enabled:
        return model
    targets = lora_targets(model, lora.target_modules)
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets)
    with torch.device(device):
        model = inject_adapter_in_model(config, model)
    for name, param in model.named_parameters():
        trainable = is_lora_weight(name) or any(name.startswith(p) for p in always_train)
        param.requires_grad_(trainable or not lora.only_optimize_lora)
    return model


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)
