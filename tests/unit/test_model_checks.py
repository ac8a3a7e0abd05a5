"""Checks of the config against the model, on the meta-device model (no weights): context and LoRA targets."""

from __future__ import annotations

import pytest
from conftest import compose_settings

from rlhf_exp.checkpoints.meta import meta_model
from rlhf_exp.checkpoints.model_checks import check_context, check_lora_targets, context_length
from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.presets import preset_config


def test_the_ppo_sequence_must_fit_the_models_context() -> None:
    config = preset_config("tiny")
    limit, key = context_length(config)
    assert key == "max_position_embeddings" and limit > 16
    check_context("actor", config, compose_settings(f"ppo.prompt_len={limit - 16}", "ppo.answer_len=16"))  # exactly fits
    with pytest.raises(ConfigError, match=rf"^ppo.prompt_len \+ ppo.answer_len: {limit - 15} \+ 16 = {limit + 1} tokens"):
        check_context("actor", config, compose_settings(f"ppo.prompt_len={limit - 15}", "ppo.answer_len=16"))
    check_context("actor", config, compose_settings(f"ppo.prompt_len={limit * 2}", "ppo.steps=0"))  # no PPO step: no limit


def test_lora_targets_match_as_peft_matches_them() -> None:
    model = meta_model(preset_config("tiny"), "causal_lm")
    for targets in ("[q_proj,v_proj]", "[self_attn.q_proj]", "[model.layers.0.mlp.up_proj]"):
        check_lora_targets("actor", model, compose_settings(f"lora.target_modules={targets}"))
    with pytest.raises(ConfigError) as err:
        check_lora_targets("actor", model, compose_settings("lora.target_modules=[q_proj,qproj]"))
    assert str(err.value).startswith("lora.target_modules: qproj matches no layer of model.actor (llama); valid: auto, ")
    check_lora_targets("actor", model, compose_settings("lora=disabled", "lora.target_modules=[qproj]"))  # no LoRA: unused
