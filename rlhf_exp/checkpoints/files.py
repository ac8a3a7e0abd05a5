"""What a checkpoint directory holds, by name (HF-compatible, so from_pretrained loads it unchanged).

actor ("causal_lm"): config.json + model*.safetensors (or pytorch_model*.bin) with *ForCausalLM keys.
critic ("value"): the same with base-model keys, plus value_head.safetensors holding DeepSpeed-Chat's
RewardModel `v_head.weight` [1, hidden] (absent: a fresh head).
"""

from __future__ import annotations

from pathlib import Path

VALUE_HEAD_FILE = "value_head.safetensors"
COMPLETE_MARKER = ".complete"  # a generated checkpoint is whole once this exists


def weight_files(path: Path) -> list[Path]:
    """The model's weight files in shard order (value head excluded): safetensors, else pickled pytorch_model*.bin."""
    files = sorted(f for f in path.glob("*.safetensors") if f.name != VALUE_HEAD_FILE)
    files = files or sorted(path.glob("pytorch_model*.bin"))
    if not files:
        raise FileNotFoundError(f"no weights (*.safetensors or pytorch_model*.bin) in {path}")
    return files


def checkpoint_bytes(path: Path) -> int:
    """Bytes of all safetensors files of a checkpoint (the figure memory targets are stated against)."""
    return sum(f.stat().st_size for f in path.glob("*.safetensors"))


def weight_bytes(path: Path) -> int:
    """Bytes of the model's weight files (what a loader reads)."""
    return sum(f.stat().st_size for f in weight_files(path))
