"""Generated checkpoints: a preset's random-weight checkpoint written once to the cache, or a user's path resolved.

Weights are streamed tensor by tensor into shards, so generating llama-13b needs ~one shard of RAM.
The layout is checkpoints/files.py's.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import shutil
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import torch
from rich.progress import Progress
from safetensors.torch import save_file
from torch import nn

from rlhf_exp.checkpoints.files import COMPLETE_MARKER, VALUE_HEAD_FILE
from rlhf_exp.checkpoints.locate import locate
from rlhf_exp.checkpoints.meta import meta_model, value_head_width, weight_shapes
from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.presets import preset_config
from rlhf_exp.config.roles import CheckpointKind
from rlhf_exp.config.units import GIB, torch_dtype

SHARD_BYTES = 2 * GIB
TMP_SUFFIX = ".tmp"  # <checkpoint>.tmp<pid>: being written


def _norm_weights(model: nn.Module) -> set[str]:
    """Names of the weights of normalization layers (RMSNorm, LayerNorm: any module class named *Norm)."""
    return {
        f"{owner}.{name}" if owner else name
        for owner, module in model.named_modules()
        if "norm" in type(module).__name__.lower()
        for name, _ in module.named_parameters(recurse=False)
    }


def _random_tensor(name: str, shape: tuple[int, ...], dtype: torch.dtype, seed: int, norms: set[str]) -> torch.Tensor:
    """One weight, from its own generator (seed and name), so tensors are drawn in parallel and stay reproducible."""
    if name in norms:  # norm scales start at one and shifts at zero, as in a trained model's range
        return torch.ones(shape, dtype=dtype) if name.endswith("weight") else torch.zeros(shape, dtype=dtype)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    return (torch.randn(shape, generator=gen) * 0.02).to(dtype)


def _plan_shards(shapes: dict[str, tuple[int, ...]], dtype: torch.dtype) -> list[list[str]]:
    """Group tensor names into shards of at most SHARD_BYTES (a tensor never spans shards)."""
    shards: list[list[str]] = [[]]
    size = 0
    for name, shape in shapes.items():
        nbytes = math.prod(shape) * dtype.itemsize
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    return shards


def _write_shards(shapes: dict[str, tuple[int, ...]], norms: set[str], out: Path, dtype: torch.dtype, seed: int) -> None:
    """Generate and save one shard at a time, so RAM holds at most one shard."""
    plan = _plan_shards(shapes, dtype)
    names = (
        ["model.safetensors"]
        if len(plan) == 1
        else [f"model-{i:05d}-of-{len(plan):05d}.safetensors" for i in range(1, len(plan) + 1)]
    )
    total_gib = sum(math.prod(s) for s in shapes.values()) * dtype.itemsize / GIB
    with Progress(*Progress.get_default_columns(), transient=True, disable=total_gib < 0.5) as progress:  # minutes at 13B
        task = progress.add_task(f"generating {out.name.split(TMP_SUFFIX)[0]} ({total_gib:.1f} GiB)", total=len(shapes))
        for fname, keys in zip(names, plan, strict=True):
            shard = {}
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # torch's RNG kernels are serial
                futures = {k: pool.submit(_random_tensor, k, shapes[k], dtype, seed, norms) for k in keys}
                for k, future in futures.items():
                    shard[k] = future.result()
                    progress.advance(task)
            save_file(shard, out / fname, metadata={"format": "pt"})
    if len(plan) > 1:
        total = sum(math.prod(s) * dtype.itemsize for s in shapes.values())
        weight_map = {k: fname for fname, keys in zip(names, plan, strict=True) for k in keys}
        (out / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1)
        )


def generate_checkpoint(preset: str, kind: CheckpointKind, dtype: str, out: Path, seed: int = 0) -> Path:
    """Write a random-weight checkpoint of a preset shape to `out`, atomically: in a temp dir renamed when whole,
    removed if anything (Ctrl-C, SIGTERM, a full disk) stops it. Call it under `generation_lock`."""
    tmp = out.with_name(out.name + f"{TMP_SUFFIX}{os.getpid()}")
    try:
        _generate(preset, kind, dtype, tmp, seed)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _generate(preset: str, kind: CheckpointKind, dtype: str, tmp: Path, seed: int) -> None:
    config = preset_config(preset)
    config.dtype = torch_dtype(dtype)
    model = meta_model(config, kind)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config.architectures = [type(model).__name__]
    config.save_pretrained(tmp)
    _write_shards(weight_shapes(model), _norm_weights(model), tmp, torch_dtype(dtype), seed)
    if kind == "value":
        gen = torch.Generator().manual_seed(seed + 1)
        head = (torch.randn(1, value_head_width(config), generator=gen) * 0.02).to(torch_dtype(dtype))
        save_file({"v_head.weight": head}, tmp / VALUE_HEAD_FILE, metadata={"format": "pt"})
    (tmp / COMPLETE_MARKER).write_text("ok\n")


def check_cache_dir(cache: Path) -> None:
    """model.cache_dir usable, decided without creating it (a refused job writes nothing): its nearest existing
    ancestor (or itself) a directory this process can write."""
    existing = next(p for p in (cache, *cache.parents) if p.exists() or p == p.parent)
    problem = None if existing.is_dir() else errno.ENOTDIR
    if problem is None and existing != cache and not os.access(existing, os.W_OK | os.X_OK):
        problem = errno.EACCES
    if problem is not None:
        raise ConfigError(f"model.cache_dir: cannot use {cache}: {os.strerror(problem)}; valid: a directory you can write")


@contextmanager
def generation_lock(cache: Path) -> Iterator[None]:
    """One writer per checkpoint cache at a time (jobs started together wait for it, then find its checkpoint);
    under the lock, what a killed writer left (its temp dirs, a dir without the complete marker) is removed."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
        fd = os.open(cache, os.O_RDONLY)
    except OSError as err:
        raise ConfigError(
            f"model.cache_dir: cannot use {cache}: {err.strerror or err}; valid: a directory you can write"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for stale in cache.glob(f"*{TMP_SUFFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)
        yield
    finally:
        os.close(fd)  # releases the lock


def preset_dir(preset: str, kind: CheckpointKind, dtype: str, cache_dir: str, seed: int = 0) -> Path:
    """Where a preset's generated checkpoint lives (it may not exist yet)."""
    return Path(cache_dir).expanduser() / f"{preset}-{kind}-{dtype}-seed{seed}"


def existing_checkpoint(preset: str | None, path: str | None, kind: CheckpointKind, dtype: str, cache_dir: str) -> Path | None:
    """The checkpoint directory if it is already on disk (nothing generated), else None."""
    if path:
        return locate(path)
    assert preset is not None
    out = preset_dir(preset, kind, dtype, cache_dir)
    return out if (out / COMPLETE_MARKER).exists() else None


def resolve_checkpoint(
    preset: str | None, path: str | None, kind: CheckpointKind, dtype: str, cache_dir: str, seed: int = 0
) -> Path:
    """The checkpoint directory for a role: the user's path, or the preset's (generated on first use)."""
    if path:
        return locate(path)
    assert preset is not None
    out = preset_dir(preset, kind, dtype, cache_dir, seed)
    if (out / COMPLETE_MARKER).exists():
        return out
    with generation_lock(out.parent):
        if (out / COMPLETE_MARKER).exists():  # written by the job we waited for
            return out
        shutil.rmtree(out, ignore_errors=True)
        generate_checkpoint(preset, kind, dtype, out, seed)
    return out
