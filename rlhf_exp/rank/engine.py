"""The four-model RLHF engine, built DeepSpeed-Chat's way (dschat/rlhf/rlhf_engine.py), one measured stage each.

Order and configs as DeepSpeedRLHFEngine: actor (train config, LoRA, optimizer), ref (eval config),
critic (RewardModel over the critic checkpoint, LoRA, optimizer), reward (RewardModel, eval config).
Loading (`<role>.load`) and deepspeed.initialize (`<role>.init`) are separate stages.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import deepspeed
import torch
from torch import nn

from rlhf_exp.config.deepspeed import engine_dtype_name, role_ds_config, zero_stage
from rlhf_exp.config.roles import ROLE_CHECKPOINT, ROLE_KIND, ROLES, TRAIN_ROLES
from rlhf_exp.config.schema import RunSettings
from rlhf_exp.config.stages import engine_stage
from rlhf_exp.config.units import GIB, torch_dtype
from rlhf_exp.loaders.base import LoadRequest, node_world_size
from rlhf_exp.loaders.registry import get_spec
from rlhf_exp.loaders.twin import twin_source
from rlhf_exp.rank import optimizer_states
from rlhf_exp.rank.lora import apply_lora, count_parameters
from rlhf_exp.rank.recorder import StageRecorder
from rlhf_exp.rank.reward_model import RewardModel, load_value_head


def load_role_model(
    settings: RunSettings,
    role: str,
    checkpoint: Path,
    device: torch.device,
    ds_config: dict[str, Any],
    twin: nn.Module | None = None,
) -> nn.Module:
    """The role's model as DeepSpeed-Chat hands it to deepspeed.initialize (LoRA applied for train roles)."""
    request = LoadRequest(
        role=role,
        kind=ROLE_KIND[role],
        checkpoint=checkpoint,
        dtype=torch_dtype(engine_dtype_name(ds_config)),
        device=device,
        ds_config=ds_config,
        group_size=settings.loader.group_size,
        fast_read=settings.loader.fast_read,
        read_threads=settings.loader.threads_per_rank(os.cpu_count() or 1, node_world_size()),
        chunk_bytes=settings.loader.chunk_mib << 20,
        twin=twin,
    )
    model = get_spec(settings.loader.name).load_function()(request)
    # what is initialized here (a fresh v_head, LoRA) must not depend on what the loader drew before
    torch.manual_seed(settings.seed + ROLES.index(role))
    if request.kind == "value":
        model = RewardModel(model, settings.model.num_padding_at_beginning)
        model.v_head.to(device=next(model.rwtransformer.parameters()).device)
        load_value_head(model, checkpoint)
    if role in TRAIN_ROLES:
        return apply_lora(model, settings.lora, device, always_train=("v_head",))
    model.requires_grad_(False)
    return model.eval()


def base_model(module: nn.Module) -> nn.Module:
    """The transformers model inside an engine's module (a value model's is wrapped in RewardModel)."""
    return module.rwtransformer if isinstance(module, RewardModel) else module


def _match_engine_dtype(model: nn.Module, dtype: torch.dtype) -> None:
    """ZeRO-3 refuses mixed dtypes: LoRA/value-head weights added after a low-precision load are fp32.

    Only such stragglers are cast; parameters already partitioned by zero.Init are left alone.
    """
    dtypes = {p.dtype for p in model.parameters()}
    if len(dtypes) > 1:
        for param in model.parameters():
            if param.dtype != dtype and not hasattr(param, "ds_id"):
                param.data = param.data.to(dtype)


def initialize_role(settings: RunSettings, role: str, model: nn.Module, ds_config: dict[str, Any]) -> Any:
    if zero_stage(ds_config) == 3:
        _match_engine_dtype(model, torch_dtype(engine_dtype_name(ds_config)))
    optimizer = None
    if role in TRAIN_ROLES and "optimizer" not in ds_config:
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=settings.train.lr, weight_decay=settings.train.weight_decay)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    return engine


def build_engine(
    settings: RunSettings, checkpoints: dict[str, Path], device: torch.device, world_size: int, recorder: StageRecorder
) -> dict[str, Any]:
    """All four engines, each as a `.load` and an `.init` stage; returns them by role."""
    engines: dict[str, Any] = {}
    for role in settings.roles:
        ds_config = role_ds_config(settings, role, world_size)
        with recorder.stage(engine_stage(role, "load")) as info:
            source = twin_source(settings, get_spec(settings.loader.name), role, device.type == "cuda")
            twin = base_model(engines[source].module) if source else None
            model = load_role_model(settings, role, checkpoints[ROLE_CHECKPOINT[role]], device, ds_config, twin)
            if source:
                info["copied_from"] = source
            info["trainable_params"], info["params"] = count_parameters(model)
        with recorder.stage(engine_stage(role, "init")) as info:
            engines[role] = initialize_role(settings, role, model, ds_config)
            if settings.train.optimizer_states_at_init:
                optimizer_states.allocate_at_init(engines[role])
            info["zero_stage"] = zero_stage(ds_config)
            info["optimizer_state_gib"] = round(optimizer_states.state_bytes(engines[role]) / GIB, 6)
            del model
        if settings.verify_weights:
            record_weight_digests(engines[role], recorder, role)
    return engines


def record_weight_digests(engine: Any, recorder: StageRecorder, name: str) -> None:
    """weights/<name>.json: every engine weight's digest (all ranks gather; rank 0 writes)."""
    digests = weight_digests(engine.module)
    if recorder.rank == 0:
        recorder.job_dir.write_weight_digests(name, digests)


def weight_digests(module: nn.Module) -> dict[str, str]:
    """sha256 of every engine weight's bytes, gathered first under ZeRO-3 (a collective: all ranks call it)."""
    digests = {}
    for name, param in module.named_parameters():
        with deepspeed.zero.GatheredParameters([param], modifier_rank=None, enabled=hasattr(param, "ds_id")):
            data = param.detach().cpu().contiguous()
            digests[name] = f"{data.dtype}:{tuple(data.shape)}:" + hashlib.sha256(data.view(torch.uint8).numpy()).hexdigest()
    return digests
