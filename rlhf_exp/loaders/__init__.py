"""Loading strategies by name. Each is one function: LoadRequest -> base model with weights."""

from __future__ import annotations

from rlhf_exp.loaders.base import Loader, LoadRequest
from rlhf_exp.loaders.naive import load_naive

LOADERS: dict[str, Loader] = {
    "naive": load_naive,
}


def get_loader(name: str) -> Loader:
    if name not in LOADERS:
        raise KeyError(f"loader: unknown {name!r}; valid: {', '.join(LOADERS)}")
    return LOADERS[name]


__all__ = ["LOADERS", "LoadRequest", "Loader", "get_loader"]
