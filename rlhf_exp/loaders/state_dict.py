"""Reading checkpoint weights into state dicts and matching their keys to a model."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch import nn

from rlhf_exp.checkpoints.fast_read import pread_into, read_header
from rlhf_exp.checkpoints.files import weight_files
from rlhf_exp.checkpoints.meta import checkpoint_key_mapper, weight_shapes

READ_CHUNK = 16 << 20


def read_private_state_dict(checkpoint: Path) -> dict[str, torch.Tensor]:
    """Every tensor copied into this process's private memory, as 2023's torch.load(pytorch_model.bin) did.

    Reading the bytes first (rather than memory-mapping) is the point: it is the private,
    per-rank copy that made every rank pay for the whole checkpoint.
    """
    state: dict[str, torch.Tensor] = {}
    for f in weight_files(checkpoint):
        if f.suffix == ".bin":  # pickle: tensors only, never arbitrary objects
            state.update(torch.load(f, map_location="cpu", weights_only=True))
        else:
            state.update(read_file_private(f, torch.get_num_threads()))
    return state


def read_file_private(path: Path, threads: int) -> dict[str, torch.Tensor]:
    """One safetensors file's tensors in private memory, held as `safetensors.torch.load(path.read_bytes())` holds
    them: the file's bytes read whole into one buffer, each tensor copied out of it, the buffer freed; but the read
    is `threads` parallel preads and the copies torch's parallel copy, not one thread each (a 24 GiB 13B shard set
    took 56 s to read and 139 s to deserialize on the H200 host: bench/results/seed-2026-12-04)."""
    entries = read_header(path)
    if not entries:
        return {}
    first = entries[0].start
    raw = torch.empty(entries[-1].end - first, dtype=torch.uint8)
    view = memoryview(raw.numpy())
    fd = os.open(path, os.O_RDONLY)
    try:

        def read(index: int) -> None:
            for offset in range(index * READ_CHUNK, len(view), threads * READ_CHUNK):
                pread_into(fd, view[offset : offset + READ_CHUNK], first + offset)

        with ThreadPoolExecutor(max(1, threads)) as pool:
            list(pool.map(read, range(max(1, threads))))
    finally:
        os.close(fd)
    # a byte copy first: the tensor gets its own storage, aligned for its dtype whatever its offset in the file
    return {e.name: raw[e.start - first : e.end - first].clone().view(e.dtype).reshape(e.shape) for e in entries}


def match_keys(state: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """Rename checkpoint keys to the model's as transformers' own loading does (checkpoints/meta.py)."""
    to_model = checkpoint_key_mapper(model)
    return {to_model(k): v for k, v in state.items()}


def _check_missing(stored: dict[str, tuple[int, ...]], missing_keys: list[str]) -> None:
    missing = [k for k in missing_keys if k in stored]
    if missing:
        raise KeyError(f"checkpoint lacks {len(missing)} weights of the model, e.g. {missing[:3]}")


def load_into(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """load_state_dict that fails loudly when a model weight is absent from the checkpoint (a tied weight,
    such as an lm_head sharing the embedding, is filled through the weight it is tied to)."""
    stored = weight_shapes(model)
    _check_missing(stored, model.load_state_dict(match_keys(state, model), strict=False).missing_keys)


def assign_weights(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """The checkpoint's tensors become the model's parameters (a meta-device model: nothing copied); tied
    weights are re-tied to the one the checkpoint holds."""
    stored = weight_shapes(model)  # before assigning: a tied weight counts once
    _check_missing(stored, model.load_state_dict(match_keys(state, model), strict=False, assign=True).missing_keys)
    model.tie_weights()
    left = [name for name, param in model.named_parameters() if param.is_meta]
    if left:
        raise KeyError(f"checkpoint lacks {len(left)} weights of the model, e.g. {left[:3]}")
