"""Checkpoints on disk: generate a preset's random-weight checkpoint once, or resolve a local path.

Layout (HF-compatible, so from_pretrained loads it unchanged):
  actor ("causal_lm"): config.json + model*.safetensors with LlamaForCausalLM keys.
  critic ("value"): config.json + model*.safetensors with LlamaModel keys, plus value_head.safetensors
  holding DeepSpeed-Chat's RewardModel `v_head.weight` [1, hidden].
Weights are streamed tensor by tensor into shards, so generating llama-13b needs ~one shard of RAM.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Literal

import torch
from safetensors.torch import save_file
from transformers import LlamaForCausalLM, LlamaModel, PretrainedConfig

from rlhf_exp.presets import preset_config

CheckpointKind = Literal["causal_lm", "value"]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
VALUE_HEAD_FILE = "value_head.safetensors"
# which checkpoint each role is built from, and as what (DeepSpeed-Chat: ref from the actor's, reward from the critic's)
ROLE_KIND: dict[str, CheckpointKind] = {"actor": "causal_lm", "ref": "causal_lm", "critic": "value", "reward": "value"}
ROLE_CHECKPOINT = {"actor": "actor", "ref": "actor", "critic": "critic", "reward": "critic"}
COMPLETE_MARKER = ".complete"
SHARD_BYTES = 2 * 1024**3


def checkpoint_bytes(path: Path) -> int:
    """Bytes of all safetensors files of a checkpoint (the figure memory targets are stated against)."""
    return sum(f.stat().st_size for f in path.glob("*.safetensors"))


def weight_files(path: Path) -> list[Path]:
    """The model's weight files in shard order (value head excluded): safetensors, else pickled pytorch_model*.bin."""
    files = sorted(f for f in path.glob("*.safetensors") if f.name != VALUE_HEAD_FILE)
    files = files or sorted(path.glob("pytorch_model*.bin"))
    if not files:
        raise FileNotFoundError(f"no weights (*.safetensors or pytorch_model*.bin) in {path}")
    return files


def _random_tensor(name: str, shape: torch.Size, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if name.endswith("norm.weight"):  # RMSNorm scales start at one, as in a trained model's range
        return torch.ones(shape, dtype=dtype)
    return (torch.randn(shape, generator=gen) * 0.02).to(dtype)


def _plan_shards(shapes: dict[str, torch.Size], dtype: torch.dtype) -> list[list[str]]:
    """Group tensor names into shards of at most SHARD_BYTES (a tensor never spans shards)."""
    shards: list[list[str]] = [[]]
    size = 0
    for name, shape in shapes.items():
        nbytes = shape.numel() * dtype.itemsize
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    return shards


def _write_shards(shapes: dict[str, torch.Size], out: Path, dtype: torch.dtype, seed: int) -> None:
    """Generate and save one shard at a time, so RAM holds at most one shard."""
    gen = torch.Generator().manual_seed(seed)
    plan = _plan_shards(shapes, dtype)
    names = (
        ["model.safetensors"]
        if len(plan) == 1
        else [f"model-{i:05d}-of-{len(plan):05d}.safetensors" for i in range(1, len(plan) + 1)]
    )
    for fname, keys in zip(names, plan, strict=True):
        shard = {k: _random_tensor(k, shapes[k], dtype, gen) for k in keys}
        save_file(shard, out / fname, metadata={"format": "pt"})
    if len(plan) > 1:
        total = sum(s.numel() * dtype.itemsize for s in shapes.values())
        weight_map = {k: fname for fname, keys in zip(names, plan, strict=True) for k in keys}
        (out / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1)
        )


def model_class(kind: CheckpointKind) -> type[LlamaForCausalLM] | type[LlamaModel]:
    return LlamaForCausalLM if kind == "causal_lm" else LlamaModel


def meta_model(config: PretrainedConfig, kind: CheckpointKind) -> LlamaForCausalLM | LlamaModel:
    """The architecture a checkpoint of `kind` holds, built on the meta device: shapes, no memory."""
    with torch.device("meta"):
        return model_class(kind)(config)


def generate_checkpoint(preset: str, kind: CheckpointKind, dtype: str, out: Path, seed: int = 0) -> Path:
    """Write a random-weight checkpoint of a preset shape to `out` (atomically, via a temp dir)."""
    config = preset_config(preset)
    config.dtype = DTYPES[dtype]
    shapes = {k: v.shape for k, v in meta_model(config, kind).state_dict().items()}
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config.architectures = [model_class(kind).__name__]
    config.save_pretrained(tmp)
    _write_shards(shapes, tmp, DTYPES[dtype], seed)
    if kind == "value":
        gen = torch.Generator().manual_seed(seed + 1)
        head = (torch.randn(1, config.hidden_size, generator=gen) * 0.02).to(DTYPES[dtype])
        save_file({"v_head.weight": head}, tmp / VALUE_HEAD_FILE, metadata={"format": "pt"})
    (tmp / COMPLETE_MARKER).write_text("ok\n")
    if out.exists():  # another job generated it meanwhile: keep theirs
        shutil.rmtree(tmp)
    else:
        tmp.rename(out)
    return out


def preset_dir(preset: str, kind: CheckpointKind, dtype: str, cache_dir: str, seed: int = 0) -> Path:
    """Where a preset's generated checkpoint lives (it may not exist yet)."""
    return Path(cache_dir).expanduser() / f"{preset}-{kind}-{dtype}-seed{seed}"


def existing_checkpoint(preset: str | None, path: str | None, kind: CheckpointKind, dtype: str, cache_dir: str) -> Path | None:
    """The checkpoint directory if it is already on disk (nothing generated), else None."""
    if path:
        return Path(path).expanduser().resolve()
    assert preset is not None
    out = preset_dir(preset, kind, dtype, cache_dir)
    return out if (out / COMPLETE_MARKER).exists() else None


def resolve_checkpoint(
    preset: str | None, path: str | None, kind: CheckpointKind, dtype: str, cache_dir: str, seed: int = 0
) -> Path:
    """The checkpoint directory for a role: the user's path, or the preset's (generated on first use)."""
    if path:
        return Path(path).expanduser().resolve()
    assert preset is not None
    out = preset_dir(preset, kind, dtype, cache_dir, seed)
    if not (out / COMPLETE_MARKER).exists():
        shutil.rmtree(out, ignore_errors=True)
        generate_checkpoint(preset, kind, dtype, out, seed)
    return out
