"""DeepSpeed configs per role, with DeepSpeed-Chat's keys (utils/ds_utils.py) unchanged.

Train roles (actor, critic) get get_train_ds_config; frozen roles (ref, reward) get
get_eval_ds_config. A role with a config_file uses the user's JSON instead ("auto" batch keys
filled in). Deviations from DeepSpeed-Chat, each because CPU ranks must run it too: the hybrid
engine stays off (it does not run on CPU) and `zero_force_ds_cpu_optimizer` is false so offload
accepts torch's AdamW (DeepSpeedCPUAdam would JIT-compile for a minute).
"""

from __future__ import annotations

from typing import Any

from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.roles import TRAIN_ROLES
from rlhf_exp.config.schema import RoleZero, RunSettings, read_ds_json

# ZeRO-3's gathered-parameter bounds as DeepSpeed-Chat sets them (max live parameters, prefetch bucket), in elements
STAGE3_BUCKET = 3e7
# reduce_bucket_size, which DeepSpeed-Chat leaves at DeepSpeed's default, in elements (the planner sizes buckets by it)
REDUCE_BUCKET = 500_000_000

_PRECISION = {"fp16": ("fp16", {"enabled": True, "loss_scale_window": 100}), "bf16": ("bf16", {"enabled": True})}


def _batch_keys(settings: RunSettings, world_size: int) -> dict[str, int]:
    t = settings.train
    return {
        "train_batch_size": t.micro_batch_size * t.grad_accum * world_size,
        "train_micro_batch_size_per_gpu": t.micro_batch_size,
        "gradient_accumulation_steps": t.grad_accum,
    }


def _train_config(zero: RoleZero, memory_efficient_linear: bool) -> dict[str, Any]:
    device = "cpu" if zero.offload else "none"
    return {
        "steps_per_print": 10,
        "zero_optimization": {
            "stage": zero.stage,
            "overlap_comm": True,
            "offload_param": {"device": device},
            "offload_optimizer": {"device": device},
            "stage3_param_persistence_threshold": 1e4,
            "stage3_max_live_parameters": STAGE3_BUCKET,
            "stage3_prefetch_bucket_size": STAGE3_BUCKET,
            "memory_efficient_linear": memory_efficient_linear,  # DeepSpeed-Chat: False
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
    cfg = read_ds_json(path)
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
    train = role in TRAIN_ROLES
    cfg = _train_config(zero, settings.train.memory_efficient_linear) if train else _eval_config(zero)
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


def engine_settings(ds_config: dict[str, Any]) -> dict[str, Any]:
    """What an engine runs with, read from the config deepspeed.initialize gets: ZeRO stage, dtype, offload."""
    zero = ds_config.get("zero_optimization", {})
    return {
        "zero_stage": zero_stage(ds_config),
        "dtype": engine_dtype_name(ds_config),
        "offload_optimizer": zero.get("offload_optimizer", {}).get("device", "none"),
        "offload_param": zero.get("offload_param", {}).get("device", "none"),
    }


def check_role_configs(settings: RunSettings, device: str) -> None:
    """Every role's DeepSpeed config as DeepSpeed itself will read it, before any rank: keys DeepSpeed does not
    know (a misspelled top-level key is silently ignored by DeepSpeed), values its schema refuses, batch keys
    that disagree with `gpus`, fp16 on CPU ranks. Raises ConfigError naming the key."""
    from deepspeed.runtime.config import DeepSpeedConfig  # torch: imported only by the job and `plan`

    for role in settings.roles:
        zero: RoleZero = getattr(settings.zero, role)
        key = f"zero.{role}.config_file" if zero.config_file else "zero"
        source = f"{key}: {zero.config_file}" if zero.config_file else f"zero.{role}"
        cfg = role_ds_config(settings, role, settings.gpus)
        micro, accum = cfg["train_micro_batch_size_per_gpu"], cfg["gradient_accumulation_steps"]
        if cfg["train_batch_size"] != micro * accum * settings.gpus:
            raise ConfigError(
                f"{source}: train_batch_size {cfg['train_batch_size']} != train_micro_batch_size_per_gpu {micro} x "
                f'gradient_accumulation_steps {accum} x gpus {settings.gpus}; valid: "auto" or consistent values'
            )
        if device == "cpu" and engine_dtype_name(cfg) == "fp16":
            where = f"{source}: fp16" if zero.config_file else "dtype: fp16"
            raise ConfigError(f"{where} is not supported by DeepSpeed on CPU ranks; valid here: fp32, bf16")
        seen = _ReadKeys({**cfg, "train_batch_size": micro * accum})  # DeepSpeed checks batch keys at world size 1 here
        try:
            DeepSpeedConfig(seen)
        except Exception as err:  # DeepSpeed's pydantic and assertion errors, as one line
            raise ConfigError(f"{source}: DeepSpeed refuses it: {_one_line(err)}") from None
        unknown = sorted(set(cfg) - seen.read)
        if unknown:
            raise ConfigError(f"{source}: {unknown[0]!r} is not a DeepSpeed setting (DeepSpeed would ignore it); fix or drop it")


class _ReadKeys(dict):
    """A config dict that remembers which top-level keys DeepSpeed asked for: the ones it knows."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def _one_line(err: Exception) -> str:
    errors = getattr(err, "errors", None)
    if callable(errors):  # pydantic: name the field
        first = errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
