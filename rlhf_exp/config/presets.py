"""Named model shapes for generated checkpoints: real transformers architectures, random weights.

Each preset is a family (a transformers model_type) and its shape; the published shapes where the name
says so (llama-*: Llama 1/2 configs; opt-*: facebook/opt-*; qwen2.5-*: Qwen/Qwen2.5-* config.json).
The tiny-<family> presets are the test checkpoints of every tested family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PretrainedConfig

TOKEN_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)  # PPO prompts draw ids above these


@dataclass(frozen=True)
class Preset:
    family: str  # transformers model_type
    shape: dict[str, Any] = field(default_factory=dict)


def _llama(hidden: int, intermediate: int, layers: int, heads: int, vocab: int = 32000) -> Preset:
    shape = dict(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers, num_attention_heads=heads)
    return Preset(
        "llama",
        {
            **shape,
            "vocab_size": vocab,
            "num_key_value_heads": heads,
            "max_position_embeddings": 2048,
            "tie_word_embeddings": False,
        },
    )


_TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=512, max_position_embeddings=512)
PRESETS: dict[str, Preset] = {
    "tiny": _llama(64, 172, 2, 4, vocab=512),
    "medium": _llama(768, 2048, 8, 12),
    "llama-350m": _llama(1024, 2816, 24, 16),
    "llama-1.3b": _llama(2048, 5504, 24, 16),
    "llama-7b": _llama(4096, 11008, 32, 32),
    "llama-13b": _llama(5120, 13824, 40, 40),
    # DeepSpeed-Chat's default scenario: OPT-1.3b actor, OPT-350m critic (which projects 1024 -> 512 at the end)
    "opt-1.3b": Preset(
        "opt",
        dict(
            hidden_size=2048,
            ffn_dim=8192,
            num_hidden_layers=24,
            num_attention_heads=32,
            vocab_size=50272,
            word_embed_proj_dim=2048,
            max_position_embeddings=2048,
        ),
    ),
    "opt-350m": Preset(
        "opt",
        dict(
            hidden_size=1024,
            ffn_dim=4096,
            num_hidden_layers=24,
            num_attention_heads=16,
            vocab_size=50272,
            word_embed_proj_dim=512,
            do_layer_norm_before=False,
            max_position_embeddings=2048,
        ),
    ),
    # a current family: grouped-query attention, untied 7B, tied small models
    "qwen2.5-7b": Preset(
        "qwen2",
        dict(
            hidden_size=3584,
            intermediate_size=18944,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            vocab_size=152064,
            max_position_embeddings=32768,
            rope_theta=1e6,
            tie_word_embeddings=False,
        ),
    ),
    "qwen2.5-1.5b": Preset(
        "qwen2",
        dict(
            hidden_size=1536,
            intermediate_size=8960,
            num_hidden_layers=28,
            num_attention_heads=12,
            num_key_value_heads=2,
            vocab_size=151936,
            max_position_embeddings=32768,
            rope_theta=1e6,
            tie_word_embeddings=True,
        ),
    ),
    # one tiny checkpoint per tested family (tests/e2e/test_families.py)
    "tiny-mistral": Preset("mistral", {**_TINY, "intermediate_size": 128, "num_key_value_heads": 2}),
    "tiny-qwen2": Preset("qwen2", {**_TINY, "intermediate_size": 128, "num_key_value_heads": 2, "tie_word_embeddings": True}),
    "tiny-gemma": Preset("gemma", {**_TINY, "intermediate_size": 128, "num_key_value_heads": 1, "head_dim": 16}),
    "tiny-phi": Preset("phi", {**_TINY, "intermediate_size": 128}),
    "tiny-gpt_neox": Preset("gpt_neox", {**_TINY, "intermediate_size": 128}),
    "tiny-opt": Preset("opt", {**_TINY, "ffn_dim": 128, "word_embed_proj_dim": 32}),
}


def preset_config(name: str) -> PretrainedConfig:
    """The config of a preset; raises KeyError naming the valid presets."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    from transformers import AutoConfig  # heavy: imported only where a checkpoint is made or planned

    preset = PRESETS[name]
    return AutoConfig.for_model(preset.family, **preset.shape, **TOKEN_IDS)
