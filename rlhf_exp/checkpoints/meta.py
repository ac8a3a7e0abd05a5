"""The architecture a checkpoint holds, built on the meta device through transformers' Auto classes:
shapes for the checks and the planner, LoRA targets, the value head's width; no memory.

Any decoder-only causal LM that AutoModelForCausalLM builds is supported (Llama, Mistral, Qwen2, Gemma,
Phi, GPT-NeoX, OPT, ...); checkpoints/checks.py refuses encoder-only and encoder-decoder models.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from transformers import AutoModel, AutoModelForCausalLM, PretrainedConfig

from rlhf_exp.config.roles import CheckpointKind


def model_class(kind: CheckpointKind) -> type:
    """causal_lm (actor, ref): the family's *ForCausalLM; value (critic, reward): its base model under a value head."""
    return AutoModelForCausalLM if kind == "causal_lm" else AutoModel


def meta_model(config: PretrainedConfig, kind: CheckpointKind) -> nn.Module:
    """The model of `kind` for `config` on the meta device."""
    with torch.device("meta"):
        return model_class(kind).from_config(config)


def weight_shapes(model: nn.Module) -> dict[str, tuple[int, ...]]:
    """What a checkpoint of this model stores: parameters (a tied weight once) and persistent buffers."""
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    persistent = model.state_dict().keys()
    shapes.update({name: tuple(b.shape) for name, b in model.named_buffers() if name in persistent})
    return shapes


def checkpoint_key_mapper(model: nn.Module) -> Callable[[str], str]:
    """Checkpoint key -> this model's key, as transformers' own loading renames it: the base-model prefix added
    or stripped (a causal-LM checkpoint feeding a base model, and back) and the family's legacy names
    (GPT-NeoX's embed_out is lm_head)."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key

    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    keys = dict.fromkeys(model.state_dict(), True)  # transformers tests `.get(key) is not None`
    return lambda key: rename_source_key(key, renamings, converters, model.base_model_prefix, keys)[0]


def base_name(model: nn.Module, name: str) -> str:
    """A weight's name within the base model: '<prefix>.' (model., gpt_neox., ...) stripped."""
    return name.removeprefix(f"{model.base_model_prefix}.")


def value_head_width(config: PretrainedConfig) -> int:
    """The width of the base model's output, which DeepSpeed-Chat's v_head reads (OPT: word_embed_proj_dim)."""
    return getattr(config, "word_embed_proj_dim", None) or config.hidden_size


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The stack of transformer blocks: the model's longest ModuleList."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
    if not lists:
        raise ValueError(f"{type(model).__name__} has no list of decoder layers")
    return max(lists, key=len)


def is_lora_weight(name: str) -> bool:
    """Whether a parameter or state-dict name is a LoRA adapter's (peft names them lora_A, lora_B, lora_embedding_*...)."""
    return "lora_" in name


def lora_targets(model: nn.Module, configured: list[str] | str = "auto") -> list[str]:
    """The linear layers LoRA adapts, by leaf name: `lora.target_modules` when given, else ("auto") the
    family's attention and MLP linear layers, every nn.Linear inside a decoder layer (DeepSpeed-Chat's
    --lora_module_name points at the layer stack the same way)."""
    if configured != "auto":
        return list(configured)
    block = decoder_layers(model)[0]
    return sorted({name.rsplit(".", 1)[-1] for name, m in block.named_modules() if isinstance(m, nn.Linear)})
