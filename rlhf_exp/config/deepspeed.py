"""DeepSpeed configs per role, with DeepSpeed-Chat's keys (utils/ds_utils.py) unchanged.

Train roles (actor, critic) get get_train_ds_config; frozen roles (ref, reward) get
get_eval_ds_config. A role with a config_file uses the user's JSON instead ("auto" batch keys
filled in). Deviations from DeepSpeed-Chat, each because CPU ranks must run it too: the hybrid
engine stays off (it does not run on CPU) and `zero_force_ds_cpu_optimizer` is false so offload
accepts torch's AdamW (DeepSpeedCPUAdam would JIT-compile for a minute).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlhf_exp.config.roles import TRAIN_ROLES
from rlhf_exp.config.schema import RoleZero, RunSettings

_PRECISION = {"fp16": ("fp16", {"enabled": True, "loss_scale_window": 100}), "bf16": ("bf16", {"enabled": True})}


def _batch_keys(settings: RunSettings, world_size: int) -> dict[str, int]:
    t = settings.train
    return {
        "train_batch_size": t.micro_batch_size * t.grad_accum * world_size,
        "train_micro_batch_size_per_gpu": t.micro_batch_size,
        "gradient_accumulation_steps": t.grad_accum,
    }


def _train_config(zero: RoleZero) -> dict[str, Any]:
    device = "cpu" if zero.offload else "none"
    return {
        "steps_per_print": 10,
        "zero_optimization": {
            "stage": zero.stage,
            "overlap_comm": True,
            "offload_param": {"device": device},
            "offload_optimizer": {"device": device},
            "stage3_param_persistence_threshold": 1e4,
            "stage3_max_live_parameters": 3e7,
            "stage3_prefetch_bucket_size": 3e7,
            "memory_efficient_linear": False,
        },
        "gradient_clipping": 1.0,
        "prescale_gradients": False,
        "wall_clock_breakdown": False,
        "hybrid_engine": {"enabled": False},
        "zero_force_ds_cpu_optimizer": False,
    }


def _eval_config(zero: RoleZero) -> dict[str, Any]:
    return {
        "steps_per_print": 10,
        "zero_optimization": {
            "stage": zero.stage,
            "stage3_param_persistence_threshold": 1e4,
            "offload_param": {"device": "cpu" if zero.offload else "none"},
            "memory_efficient_linear": False,
        },
        "gradient_clipping": 1.0,
        "prescale_gradients": False,
        "wall_clock_breakdown": False,
    }


def _user_config(path: str, batch: dict[str, int]) -> dict[str, Any]:
    cfg = json.loads(Path(path).expanduser().read_text())
    for key, value in batch.items():
        if cfg.get(key, "auto") == "auto":
            cfg[key] = value
    cfg.setdefault("zero_force_ds_cpu_optimizer", False)
    return cfg


def role_ds_config(settings: RunSettings, role: str, world_size: int) -> dict[str, Any]:
    """The DeepSpeed config dict passed to deepspeed.initialize for one role."""
    zero: RoleZero = getattr(settings.zero, role)
    batch = _batch_keys(settings, world_size)
    if zero.config_file:
        return _user_config(zero.config_file, batch)
    cfg = _train_config(zero) if role in TRAIN_ROLES else _eval_config(zero)
    if settings.dtype in _PRECISION:
        key, value = _PRECISION[settings.dtype]
        cfg[key] = value
    return {**batch, **cfg}


def zero_stage(ds_config: dict[str, Any]) -> int:
    return int(ds_config.get("zero_optimization", {}).get("stage", 0))


def engine_dtype_name(ds_config: dict[str, Any]) -> str:
    """fp16/bf16/fp32 as the engine will run, read from the config itself (user JSONs included)."""
    for key in ("bf16", "bfloat16"):
        if ds_config.get(key, {}).get("enabled"):
            return "bf16"
    if ds_config.get("fp16", {}).get("enabled"):
        return "fp16"
    return "fp32"
