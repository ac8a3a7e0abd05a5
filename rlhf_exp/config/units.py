"""Units and dtypes, declared once: the GiB every figure is reported in, and the engine/checkpoint dtypes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

GIB = 1024**3
# config name -> (torch attribute, bytes per element)
DTYPES: dict[str, tuple[str, int]] = {"fp32": ("float32", 4), "bf16": ("bfloat16", 2), "fp16": ("float16", 2)}
DTYPE_BYTES = {name: size for name, (_, size) in DTYPES.items()}


def gib(n: float | None, digits: int = 4) -> float | None:
    """Bytes as GiB, rounded; None stays None."""
    return None if n is None else round(n / GIB, digits)


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a config dtype name (torch imported only here, where a rank needs it)."""
    import torch

    return getattr(torch, DTYPES[name][0])
