"""The validated shape of a composed config. Every check here runs before any rank starts.

Pydantic turns types, ranges and choices into errors; `validate` turns the first one into a
single line naming the key and the valid choices.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationToMissingValueError, MissingMandatoryValue, OmegaConfBaseException
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.presets import PRESETS
from rlhf_exp.config.roles import ROLES
from rlhf_exp.config.stages import job_stages
from rlhf_exp.loaders.registry import LOADER_CHOICES, LOADERS


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckpointSpec(Strict):
    preset: str | None = None
    path: str | None = None

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str | None) -> str | None:
        if v is not None and v not in PRESETS:
            raise ValueError(f"unknown preset {v!r}; valid: {', '.join(PRESETS)}")
        return v

    @model_validator(mode="after")
    def _preset_or_path(self) -> CheckpointSpec:
        if self.path:
            from rlhf_exp.checkpoints.locate import locate, missing_message  # a hub id: the local HF cache

            if not (locate(self.path) / "config.json").is_file():
                raise ValueError(missing_message(self.path))
        elif not self.preset:
            raise ValueError("set a preset or a path")
        return self


class ModelSettings(Strict):
    actor: CheckpointSpec
    critic: CheckpointSpec
    checkpoint_dtype: Literal["fp32", "bf16", "fp16"] = "fp16"
    num_padding_at_beginning: int = Field(default=0, ge=0)  # DeepSpeed-Chat's --num_padding_at_beginning (OPT: 1)
    cache_dir: str


class RoleZero(Strict):
    stage: Literal[0, 1, 2, 3] = 0
    offload: bool = False
    config_file: str | None = None
    _effective_stage: int = PrivateAttr(0)  # the stage the role runs at, resolved once at validation

    @field_validator("config_file")
    @classmethod
    def _readable_json_object(cls, v: str | None) -> str | None:
        if v is not None:
            read_ds_json(v)
        return v

    def model_post_init(self, context: Any, /) -> None:
        file_stage = read_ds_json(self.config_file).get("zero_optimization", {}).get("stage", 0) if self.config_file else None
        self._effective_stage = self.stage if file_stage is None else int(file_stage)


def read_ds_json(path: str) -> dict[str, Any]:
    """A user's DeepSpeed config JSON; ValueError (one line) when it is missing or not a JSON object."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"no such ds_config file: {path}")
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object of DeepSpeed settings")
    return data


class ZeroSettings(Strict):
    actor: RoleZero
    critic: RoleZero
    ref: RoleZero
    reward: RoleZero
    config_file: str | None = None  # zero=custom: shared by every role that it can serve

    @model_validator(mode="after")
    def _frozen_roles_without_an_optimizer(self) -> ZeroSettings:
        """DeepSpeed runs ZeRO-1/2 only with an optimizer, which the frozen roles (ref, reward) have none of. The
        shared JSON of zero=custom serves them where it can (ZeRO-0 or 3); a ZeRO-1/2 one leaves them DeepSpeed-Chat's
        eval config at ZeRO-0, as DeepSpeed-Chat does itself. A role's own ZeRO-1/2 JSON is refused."""
        for role in ("ref", "reward"):
            zero: RoleZero = getattr(self, role)
            if zero.config_file is None or role_stage(zero) not in (1, 2):
                continue
            if zero.config_file == self.config_file:
                setattr(self, role, RoleZero(stage=0, offload=zero.offload))
                continue
            raise ValueError(
                f"zero.{role}.config_file: {zero.config_file} is ZeRO stage {role_stage(zero)}, which DeepSpeed runs "
                f"only with an optimizer, and {role} is frozen (no optimizer); valid: a JSON at stage 0 or 3, or "
                f"zero.{role}.config_file=null (DeepSpeed-Chat's eval config)"
            )
        return self


class LoraSettings(Strict):
    enabled: bool
    r: int = Field(gt=0)
    alpha: float = Field(gt=0)
    dropout: float = Field(ge=0, lt=1)
    target_modules: list[str] | Literal["auto"] = "auto"  # auto: the family's attention and MLP linear layers
    only_optimize_lora: bool


class LoaderSettings(Strict):
    name: str
    group_size: int = Field(default=1, gt=0)  # used by strategies that take turns
    fast_read: bool = True  # direct on a GPU: parallel pinned reads; zero3_init: a rank reads its share; false: from_pretrained
    read_threads: int = Field(default=0, ge=0, le=256)  # fast_read's reading threads per rank; 0: the node's cores / ranks
    chunk_mib: int = Field(default=16, gt=0, le=4096)  # fast_read's chunk (two pinned buffers of it per thread)
    copy_twin: bool = True  # GPU ranks, direct and rank0_broadcast: ref/reward copy actor's/critic's weights there

    def threads_per_rank(self, cores: int, ranks_per_node: int) -> int:
        """fast_read's threads: read_threads, or the rank's share of the node's cores (its ranks read at once), 2-16."""
        return self.read_threads or max(2, min(16, cores // ranks_per_node))


class TrainSettings(Strict):
    micro_batch_size: int = Field(gt=0)
    grad_accum: int = Field(gt=0)
    lr: float = Field(gt=0)
    weight_decay: float = Field(ge=0)
    optimizer_states_at_init: bool = False  # DeepSpeed 0.9's timing: ZeRO-1/2 Adam states at deepspeed.initialize
    memory_efficient_linear: bool = False  # the train roles' ZeRO-3 backward: DeepSpeed-Chat's off, DeepSpeed's on


class PpoSettings(Strict):
    """PPO steps after the engine is built, with DeepSpeed-Chat's defaults (ppo_trainer.py)."""

    steps: int = Field(default=1, ge=0, le=1000)
    prompt_len: int = Field(default=16, gt=0)
    answer_len: int = Field(default=16, gt=0)
    kl_ctl: float = Field(default=0.1, ge=0)
    clip_reward_value: float = Field(default=5.0, gt=0)
    cliprange: float = Field(default=0.2, gt=0)
    cliprange_value: float = Field(default=0.2, gt=0)
    gamma: float = Field(default=1.0, ge=0, le=1)
    lam: float = Field(default=0.95, ge=0, le=1)


class WatcherSettings(Strict):
    interval_s: float = Field(gt=0, le=10)
    # stop the job when node memory (MemTotal - MemAvailable) crosses this share of MemTotal; null: never
    max_node_fraction: float | None = Field(default=0.95, gt=0, le=1)
    # the watchdog trips when the node figure plus its climb over the last lead_s reaches the limit
    lead_s: float = Field(default=0.2, ge=0, le=10)


class MachineSettings(Strict):
    """The machine a job is planned for: `local` reads this host; a preset or these fields describe another."""

    name: str = "local"
    host_gib: float | None = Field(default=None, gt=0)  # per node
    gpu_gib: float | None = Field(default=None, gt=0)  # per GPU
    gpus_per_node: int | None = Field(default=None, gt=0)
    nodes: int | None = Field(default=None, gt=0)
    emulate: bool = False  # run as if on this machine: its host and GPU memory as caps (memory/emulation.py)
    emulate_host_with: Literal["auto", "cgroup", "watchdog"] = "auto"  # auto: a cgroup where this host allows one


class PlanSettings(Strict):
    fit_check: bool = True  # refuse, before any rank starts, a job whose plan does not fit this machine
    host_fraction: float = Field(default=0.9, gt=0, le=1)  # share of available host memory a plan may use


class WandbSettings(Strict):
    mode: Literal["online", "offline", "disabled"]
    project: str
    entity: str | None = None


class FaultSettings(Strict):
    """Deliberate failure of one rank in one stage: how faults are reproduced and tested."""

    stage: str | None = None
    rank: int = Field(default=0, ge=0)
    mode: Literal["raise", "kill", "hang", "kill_watcher"] = "raise"


class RunSettings(Strict):
    model: ModelSettings
    zero: ZeroSettings
    lora: LoraSettings
    loader: LoaderSettings
    gpus: int = Field(gt=0, le=1024)
    device: Literal["auto", "cuda", "cpu"]
    dtype: Literal["fp32", "bf16", "fp16"]
    backend: Literal["auto", "nccl", "gloo"]
    share_gpus: bool = False
    seed: int
    train: TrainSettings
    ppo: PpoSettings = PpoSettings()
    plan: PlanSettings = PlanSettings()
    machine: MachineSettings = MachineSettings()
    watcher: WatcherSettings
    dist_timeout_s: float = Field(gt=0)
    job_timeout_s: float = Field(gt=0)
    wandb: WandbSettings
    fault: FaultSettings = FaultSettings()
    verify_weights: bool = False
    profile: bool = False
    profile_gpu_memory: bool = False
    resume: bool = True
    roles: list[Literal["actor", "ref", "critic", "reward"]] = Field(default=list(ROLES), min_length=1)

    @field_validator("roles")
    @classmethod
    def _roles_in_engine_order(cls, v: list[str]) -> list[str]:
        return [r for r in ROLES if r in v]  # DeepSpeed-Chat's build order, whatever the order given

    @model_validator(mode="after")
    def _ppo_needs_all_roles(self) -> RunSettings:
        if self.ppo.steps and list(self.roles) != list(ROLES):
            raise ValueError(
                f"ppo.steps: a PPO step needs all four roles, but roles is {list(self.roles)}; "
                "valid: ppo.steps=0, or roles=[actor,ref,critic,reward]"
            )
        return self

    @model_validator(mode="after")
    def _fault_names_a_stage_and_rank_of_this_job(self) -> RunSettings:
        stages = job_stages(self.roles, self.ppo.steps)
        if self.fault.stage is not None and self.fault.stage not in stages:
            raise ValueError(f"fault.stage: {self.fault.stage!r} is not a stage of this job; valid: {', '.join(stages)}")
        if self.fault.stage is not None and self.fault.rank >= self.gpus:
            raise ValueError(f"fault.rank: {self.fault.rank} is not a rank of this job; valid: 0 to {self.gpus - 1}")
        return self

    @model_validator(mode="after")
    def _emulation_needs_a_machine(self) -> RunSettings:
        machine = self.machine
        if machine.emulate and machine.host_gib is None and machine.gpu_gib is None:
            raise ValueError(
                f"machine.emulate: machine={machine.name} sets neither host_gib nor gpu_gib, so there is nothing to "
                "emulate; valid: a target machine (machine=a100-80g-8x, h100-80g-8x, h200-141g-8x), or "
                "machine.host_gib= and/or machine.gpu_gib="
            )
        return self

    @model_validator(mode="after")
    def _partitioned_loader_needs_stage3(self) -> RunSettings:
        spec = LOADERS.get(self.loader.name)
        if spec is None or not spec.partitioned:
            return self
        for role in ROLES:
            stage = role_stage(getattr(self.zero, role))
            if stage != 3:
                raise ValueError(
                    f"loader: {spec.name} needs ZeRO-3 for every role, but zero.{role} has stage {stage}; "
                    "valid: zero=stage3, zero=stage3_offload, or another loader"
                )
        return self

    @field_validator("loader")
    @classmethod
    def _known_loader(cls, v: LoaderSettings) -> LoaderSettings:
        if v.name not in LOADER_CHOICES:
            raise ValueError(f"unknown loader {v.name!r}; valid: {', '.join(LOADER_CHOICES)}")
        return v

    def all_roles_stage3(self) -> bool:
        return all(role_stage(getattr(self.zero, role)) == 3 for role in ROLES)


def role_stage(zero: RoleZero) -> int:
    """A role's ZeRO stage: its preset's, or the one in its own ds_config JSON (read once, at validation)."""
    return zero._effective_stage


def _format(err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    got = first.get("input")
    shown = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
    if not key or msg.startswith(f"{key}."):  # the message names a key inside `key` itself
        return f"{msg}{shown}"
    return f"{key}: {msg}{shown}"


def to_plain(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config without Hydra's own node, as plain containers."""
    try:
        plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as e:
        raise ConfigError(f"{e.full_key}: missing value (set {e.full_key}=...)") from None
    except InterpolationToMissingValueError as e:
        source = e.msg.split("Missing mandatory value: ")[-1].split()[0]
        raise ConfigError(f"{source}: missing value (set {source}=...; needed by {e.full_key})") from None
    except OmegaConfBaseException as e:
        raise ConfigError(f"{getattr(e, 'full_key', '') or 'config'}: {e.msg.splitlines()[0]}") from None
    assert isinstance(plain, dict)
    plain.pop("hydra", None)
    return plain


def validate(cfg: DictConfig) -> RunSettings:
    """Validate a composed config; raises ConfigError with a one-line message."""
    return settings_of(to_plain(cfg))


def settings_of(plain: dict[str, Any]) -> RunSettings:
    """The typed settings of a config as plain data (to_plain), each role's ZeRO stage resolved; raises ConfigError."""
    try:
        return RunSettings.model_validate(plain)
    except ValidationError as e:
        raise ConfigError(_format(e)) from None
