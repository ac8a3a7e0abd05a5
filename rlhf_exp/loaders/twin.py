"""ref is built from the actor's checkpoint and reward from the critic's: when the earlier role's engine holds its
base weights whole on the GPU and untrained (always so while the engine is being built), a loader that can copies
them there (GPU to GPU, ~1 TB/s) instead of reading the same file again. Torch-free: the rank and the planner
decide with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlhf_exp.config.roles import ROLE_CHECKPOINT
from rlhf_exp.loaders.registry import LoaderSpec

if TYPE_CHECKING:
    from rlhf_exp.config.schema import RunSettings


def twin_source(settings: RunSettings, loader: LoaderSpec, role: str, on_gpu: bool) -> str | None:
    """The earlier role whose engine `role` copies its base weights from with `loader`, or None (it reads the file)."""
    from rlhf_exp.config.schema import role_stage

    source = ROLE_CHECKPOINT[role]
    if not (on_gpu and settings.loader.copy_twin and loader.copies_twin):
        return None
    if source == role or source not in settings.roles:
        return None
    if role_stage(getattr(settings.zero, source)) == 3:  # partitioned across ranks: no rank holds it whole
        return None
    return source
