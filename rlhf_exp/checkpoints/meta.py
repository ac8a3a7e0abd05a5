"""The architecture a checkpoint holds, built on the meta device: shapes for checks and the planner, no memory."""

from __future__ import annotations

import torch
from transformers import LlamaForCausalLM, LlamaModel, PretrainedConfig

from rlhf_exp.config.roles import CheckpointKind


def model_class(kind: CheckpointKind) -> type[LlamaForCausalLM] | type[LlamaModel]:
    return LlamaForCausalLM if kind == "causal_lm" else LlamaModel


def meta_model(config: PretrainedConfig, kind: CheckpointKind) -> LlamaForCausalLM | LlamaModel:
    """The model of `kind` for `config` on the meta device."""
    with torch.device("meta"):
        return model_class(kind)(config)
