"""Named Llama shapes for generated checkpoints (real architectures, random weights)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import LlamaConfig

# hidden, intermediate, layers, heads, vocab: the published shapes where the name says llama-*.
PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4, vocab_size=512),
    "medium": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=8, num_attention_heads=12, vocab_size=32000),
    "llama-350m": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=24, num_attention_heads=16, vocab_size=32000),
    "llama-1.3b": dict(hidden_size=2048, intermediate_size=5504, num_hidden_layers=24, num_attention_heads=16, vocab_size=32000),
    "llama-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32, vocab_size=32000),
    "llama-13b": dict(hidden_size=5120, intermediate_size=13824, num_hidden_layers=40, num_attention_heads=40, vocab_size=32000),
}


def preset_config(name: str) -> LlamaConfig:
    """The LlamaConfig of a preset; raises KeyError naming the valid presets."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    from transformers import LlamaConfig  # heavy: imported only where a checkpoint is made

    shape = PRESETS[name]
    return LlamaConfig(
        **shape,
        num_key_value_heads=shape["num_attention_heads"],
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
