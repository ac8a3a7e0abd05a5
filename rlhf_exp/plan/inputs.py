"""What the planner reads: model shapes (config.json or preset, meta device, no weights), checkpoint
bytes, and the machine (host memory, GPU memory, a rank's base RSS measured once per environment)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn
from transformers import PretrainedConfig

from rlhf_exp.checkpoints.architecture import supported_config
from rlhf_exp.checkpoints.files import weight_files
from rlhf_exp.checkpoints.generate import SHARD_BYTES
from rlhf_exp.checkpoints.meta import lora_targets, meta_model, value_head_width
from rlhf_exp.checkpoints.model_checks import check_context, check_lora_targets
from rlhf_exp.config.presets import preset_config
from rlhf_exp.config.roles import CHECKPOINT_KIND, ROLE_CHECKPOINT, ROLE_KIND, TRAIN_ROLES
from rlhf_exp.config.schema import CheckpointSpec, LoraSettings, RunSettings
from rlhf_exp.config.units import DTYPE_BYTES
from rlhf_exp.jobdir import write_json_atomic
from rlhf_exp.memory import kernel
from rlhf_exp.memory.gpu import Nvml
from rlhf_exp.plan.formulas import CUDA_CONTEXT_HOST
from rlhf_exp.plan.machine import Target, declared_target, local_target
from rlhf_exp.plan.terms import RankBase, RoleShape


def _config(key: str, spec: CheckpointSpec, checkpoint: Path | None) -> PretrainedConfig:
    """config.json when the checkpoint exists (no weights needed), else the preset's."""
    if checkpoint is not None and (checkpoint / "config.json").is_file():
        return supported_config(key, checkpoint)
    assert spec.preset is not None
    return preset_config(spec.preset)


def _lora_params(model: nn.Module, lora: LoraSettings) -> int:
    """r x (in + out) per targeted linear layer, as peft adds them."""
    if not lora.enabled:
        return 0
    targets = lora_targets(model, lora.target_modules)
    return sum(
        lora.r * (m.in_features + m.out_features)
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in targets
    )


def _weight_file_sizes(checkpoint: Path | None, params: int, dtype: str) -> list[int]:
    """The weight files' sizes, or (not generated yet, or config.json alone) what generation will write: shards
    of SHARD_BYTES, the rest last."""
    if checkpoint is not None and checkpoint.exists():
        try:
            return [f.stat().st_size for f in weight_files(checkpoint)]
        except FileNotFoundError:
            pass
    total = params * DTYPE_BYTES[dtype]
    return [SHARD_BYTES] * (total // SHARD_BYTES) + ([total % SHARD_BYTES] if total % SHARD_BYTES else [])


def _widths(config: PretrainedConfig) -> dict[str, int]:
    """Layers and widths, under each family's names (OPT: ffn_dim; GPT-NeoX: intermediate_size; Gemma: head_dim)."""
    text = config.get_text_config()
    hidden = text.hidden_size
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or hidden // heads
    return {
        "layers": text.num_hidden_layers,
        "hidden": hidden,
        "intermediate": getattr(text, "intermediate_size", None) or getattr(text, "ffn_dim", None) or 4 * hidden,
        "vocab": text.vocab_size,
        "kv_width": (getattr(text, "num_key_value_heads", None) or heads) * head_dim,
    }


def _read_peak(sizes: list[int]) -> int:
    """naive's read at its peak: max over shards of (bytes parsed so far, this one included, + this one's raw bytes)."""
    done, peak = 0, 0
    for size in sizes:
        done += size
        peak = max(peak, done + size)
    return peak


def role_shapes(settings: RunSettings, checkpoints: dict[str, Path | None]) -> dict[str, RoleShape]:
    """RoleShape per role; checkpoint dirs that do not exist yet (ungenerated presets) are sized from the preset."""
    shapes = {}
    models: dict[str, nn.Module] = {}  # one meta model per checkpoint: ref shares the actor's, reward the critic's
    for role in settings.roles:
        which = ROLE_CHECKPOINT[role]
        ckpt = checkpoints.get(which)
        if which not in models:
            config = _config(f"model.{which}.path", getattr(settings.model, which), ckpt)
            models[which] = meta_model(config, ROLE_KIND[role])
            check_context(which, config, settings)
            if role in TRAIN_ROLES:
                check_lora_targets(which, models[which], settings)
        model = models[which]
        config = model.config
        base = sum(p.numel() for p in model.parameters())
        lora = _lora_params(model, settings.lora) if role in TRAIN_ROLES else 0  # frozen roles get no adapters
        head = value_head_width(config) if ROLE_KIND[role] == "value" else 0
        params = base + lora + head
        trainable = 0
        if role in TRAIN_ROLES:
            trainable = lora + head if settings.lora.enabled and settings.lora.only_optimize_lora else params
        sizes = _weight_file_sizes(ckpt, base, settings.model.checkpoint_dtype)
        largest = max(p.numel() for p in model.parameters())
        shapes[role] = RoleShape(
            params=params,
            trainable=trainable,
            checkpoint_bytes=sum(sizes),
            largest_tensor=largest,
            **_widths(config),
            loaded_params=base,
            read_peak_bytes=_read_peak(sizes),
            largest_file_bytes=max(sizes, default=0),
        )
    return shapes


BASE_PROBE = """
import json, torch, deepspeed, transformers, peft
from rlhf_exp.memory import kernel
if {cuda}:
    torch.zeros(1, device="cuda")
status = kernel.process_status()
print(json.dumps({{"rss": status["VmRSS"], "private": status["VmRSS"] - status.get("RssFile", 0)}}))
"""


_PROBED: dict[Path, str] = {}  # measured in this process, not yet written (a refused job writes nothing)


def probe_rank_base(device: str, cache_dir: Path, persist: bool = True) -> RankBase:
    """The RSS (and its private part) of a fresh process that imported what a rank imports (and made a CUDA
    context on GPU). Measured once per environment (torch version, device) and cached in cache_dir; with
    persist=False kept in this process only until a later call persists it."""
    cache = cache_dir / f"base_rank_{device}_torch{torch.__version__}.v2.json"
    if cache.exists():
        return RankBase(**json.loads(cache.read_text()))
    if cache not in _PROBED:
        out = subprocess.run(
            [sys.executable, "-c", BASE_PROBE.format(cuda=device == "cuda")], capture_output=True, text=True, check=True
        )
        _PROBED[cache] = out.stdout.strip().splitlines()[-1]
    measured = _PROBED[cache]
    if persist:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(cache, json.loads(measured))  # whole or absent: jobs sharing the cache may read it at once
        except OSError:  # a read-only cache: measure again next time
            pass
    return RankBase(**json.loads(measured))


def existing_checkpoints(settings: RunSettings) -> dict[str, Path | None]:
    """The actor's and critic's checkpoint dirs where they are on disk already (nothing is generated)."""
    from rlhf_exp.checkpoints.generate import existing_checkpoint

    m = settings.model
    return {
        which: existing_checkpoint(getattr(m, which).preset, getattr(m, which).path, kind, m.checkpoint_dtype, m.cache_dir)
        for which, kind in CHECKPOINT_KIND.items()
    }


def host_available_bytes() -> int:
    return kernel.node_total_bytes() - kernel.node_used_bytes()


def target_machine(settings: RunSettings, device: str | None) -> Target:
    """machine=local: this host, its ranks on `device` (with any machine.* field set replacing what is read); else
    the declared node, on its own device (from machine.gpu_gib and the config's device; `device` is not read)."""
    if settings.machine.name != "local":
        return declared_target(settings)
    assert device is not None, "machine=local plans for a device of this host"
    if device != "cuda":
        return local_target(settings, device, kernel.node_total_bytes(), host_available_bytes(), None, 0)
    return local_target(
        settings, device, kernel.node_total_bytes(), host_available_bytes(), Nvml().total_bytes(0), torch.cuda.device_count()
    )


def rank_base(target: Target, cache_dir: Path, persist: bool = True) -> RankBase:
    """A rank's footprint before any model on the target: probed here; planning GPU ranks from a host without a GPU
    adds the host memory a CUDA context takes (CUDA_CONTEXT_HOST, measured on the H200)."""
    if target.device == "cuda" and not torch.cuda.is_available():
        cpu = probe_rank_base("cpu", cache_dir, persist)
        return RankBase(cpu.rss + CUDA_CONTEXT_HOST, cpu.private + CUDA_CONTEXT_HOST)
    return probe_rank_base(target.device, cache_dir, persist)
