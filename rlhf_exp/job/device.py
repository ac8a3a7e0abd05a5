"""Which device and process-group backend a job's ranks use, checked before any rank starts."""

from __future__ import annotations

import torch

from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.schema import RunSettings


def resolve_device(settings: RunSettings) -> tuple[str, str]:
    """(device, backend): cuda+nccl where GPUs serve every rank, gloo when ranks share GPUs or on CPU."""
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device = settings.device if settings.device != "auto" else ("cuda" if n_gpus else "cpu")
    if device == "cuda" and not n_gpus:
        raise ConfigError("device: cuda requested but no GPU is visible; valid here: auto, cpu")
    if device == "cuda" and settings.gpus > n_gpus and not settings.share_gpus:
        raise ConfigError(
            f"gpus: {settings.gpus} ranks but {n_gpus} GPU(s) visible; lower gpus, or set share_gpus=true "
            "to let ranks share GPUs (host-memory studies)"
        )
    shared = device == "cuda" and settings.gpus > n_gpus
    backend = settings.backend
    if backend == "auto":
        backend = "nccl" if device == "cuda" and not shared else "gloo"
    if backend == "nccl" and (device == "cpu" or shared):
        raise ConfigError("backend: nccl needs one GPU per rank; valid here: auto, gloo")
    return device, backend
