"""Which checkpoints rlhf_exp can build the RLHF engine from: decoder-only causal LMs, refused otherwise
in one line naming the key, before any rank (and by `plan` too)."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoConfig, PretrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

from rlhf_exp.config.errors import ConfigError

TESTED_FAMILIES = ("llama", "mistral", "qwen2", "gemma", "phi", "gpt_neox", "opt")  # tests/e2e/test_families.py
SUPPORTED = f"a decoder-only causal LM that transformers' AutoModelForCausalLM builds (tested: {', '.join(TESTED_FAMILIES)})"


def load_config(key: str, path: Path) -> PretrainedConfig:
    """The checkpoint's config.json as transformers reads it, or a one-line ConfigError."""
    model_type = _model_type(path)
    if model_type is not None and model_type not in CONFIG_MAPPING_NAMES:
        unknown = f"{key}: {path} has model_type {model_type!r}, which this transformers cannot build"
        raise ConfigError(f"{unknown}; valid: {SUPPORTED}")
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as err:
        raise ConfigError(f"{key}: {path}/config.json is unreadable ({str(err).splitlines()[0][:200]})") from None


def _model_type(path: Path) -> str | None:
    try:
        return json.loads((path / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None


def check_architecture(key: str, path: Path, config: PretrainedConfig) -> None:
    """Refuse encoder-decoder and encoder-only models, and any family with no causal-LM class."""
    kind = config.model_type
    if config.is_encoder_decoder:
        raise ConfigError(f"{key}: {path} is an encoder-decoder model ({kind}); valid: {SUPPORTED}")
    if kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not getattr(config, "is_decoder", False):
        raise ConfigError(f"{key}: {path} is an encoder-only model ({kind}); valid: {SUPPORTED}")
    if kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ConfigError(f"{key}: {path} ({kind}) has no causal-LM class in transformers; valid: {SUPPORTED}")


def supported_config(key: str, path: Path) -> PretrainedConfig:
    """config.json read and checked: what every later stage builds from."""
    config = load_config(key, path)
    check_architecture(key, path, config)
    return config
