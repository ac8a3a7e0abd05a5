"""Loading strategies by name. Each is one function: LoadRequest -> base model with the checkpoint's weights."""

from __future__ import annotations

from rlhf_exp.loaders.base import Loader, LoadRequest
from rlhf_exp.loaders.naive import load_naive
from rlhf_exp.loaders.pretrained import load_direct, load_low_mem
from rlhf_exp.loaders.rank0_broadcast import load_rank0_broadcast
from rlhf_exp.loaders.staggered import load_staggered
from rlhf_exp.loaders.zero3_init import load_zero3_init
from rlhf_exp.settings import LOADER_NAMES

LOADERS: dict[str, Loader] = {
    "naive": load_naive,
    "staggered": load_staggered,
    "low_mem": load_low_mem,
    "rank0_broadcast": load_rank0_broadcast,
    "zero3_init": load_zero3_init,
    "direct": load_direct,
}


assert tuple(LOADERS) == LOADER_NAMES, "settings.LOADER_NAMES must list every loader"


def get_loader(name: str) -> Loader:
    if name not in LOADERS:
        raise KeyError(f"loader: unknown {name!r}; valid: {', '.join(LOADERS)}")
    return LOADERS[name]


__all__ = ["LOADERS", "LoadRequest", "Loader", "get_loader"]
