"""Checks of the config against the model itself, on the meta-device model the planner builds (no weights): the
PPO sequence fits the model's context, and every LoRA target names a layer of it. Run before anything is
written or any rank starts, by the job and by `plan` alike."""

from __future__ import annotations

from torch import nn
from transformers import PretrainedConfig

from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.schema import RunSettings

# where transformers' configs keep the longest sequence a model takes, by family
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def context_length(config: PretrainedConfig) -> tuple[int, str] | None:
    for key in CONTEXT_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value, key
    return None


def check_context(which: str, config: PretrainedConfig, settings: RunSettings) -> None:
    """prompt_len + answer_len tokens pass through every model of a PPO step: within each model's context."""
    if settings.ppo.steps == 0:
        return
    found = context_length(config)
    tokens = settings.ppo.prompt_len + settings.ppo.answer_len
    if found and tokens > found[0]:
        limit, key = found
        raise ConfigError(
            f"ppo.prompt_len + ppo.answer_len: {settings.ppo.prompt_len} + {settings.ppo.answer_len} = {tokens} tokens "
            f"exceed model.{which}'s context ({key} {limit}); valid: a sum of at most {limit}"
        )


def check_lora_targets(which: str, model: nn.Module, settings: RunSettings) -> None:
    """Each name in lora.target_modules matches a module as peft matches them (the whole name, or its last parts)."""
    targets = settings.lora.target_modules
    if not settings.lora.enabled or targets == "auto":
        return
    names = [name for name, _ in model.named_modules()]
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if missing:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear)})
        raise ConfigError(
            f"lora.target_modules: {', '.join(missing)} matches no layer of model.{which} "
            f"({model.config.model_type}); valid: auto, or its linear layers: {', '.join(linear)}"
        )
