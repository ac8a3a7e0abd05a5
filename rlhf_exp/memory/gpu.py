"""GPU memory from the framework (torch.cuda) and the driver (NVML); empty dicts where no GPU exists.

torch is imported where used: the watcher process needs NVML only, and stays small and quick to start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def cuda_active(device: torch.device) -> bool:
    import torch

    return device.type == "cuda" and torch.cuda.is_available()


def reset_cuda_peak(device: torch.device) -> None:
    if cuda_active(device):
        import torch

        torch.cuda.reset_peak_memory_stats(device)


def cuda_stats(device: torch.device) -> dict[str, int]:
    """Allocated/reserved now and allocated peak since the last reset, in bytes."""
    if not cuda_active(device):
        return {}
    import torch

    torch.cuda.synchronize(device)
    return {
        "cuda_allocated": torch.cuda.memory_allocated(device),
        "cuda_reserved": torch.cuda.memory_reserved(device),
        "cuda_peak_allocated": torch.cuda.max_memory_allocated(device),
        "cuda_peak_reserved": torch.cuda.max_memory_reserved(device),
    }


class Nvml:
    """Device-wide used memory per GPU index from NVML (counts every process on the device)."""

    def __init__(self) -> None:
        self.handles: list = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._pynvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # no driver / no GPU: NVML figures are simply absent
            self.handles = []

    def used_bytes(self, index: int) -> int | None:
        if index >= len(self.handles):
            return None
        return int(self._pynvml.nvmlDeviceGetMemoryInfo(self.handles[index]).used)

    def all_used_bytes(self) -> list[int]:
        return [int(self._pynvml.nvmlDeviceGetMemoryInfo(h).used) for h in self.handles]

    def total_bytes(self, index: int = 0) -> int | None:
        if index >= len(self.handles):
            return None
        return int(self._pynvml.nvmlDeviceGetMemoryInfo(self.handles[index]).total)
