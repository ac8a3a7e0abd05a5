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
        if hasattr(torch.cuda, "reset_peak_host_memory_stats"):  # torch >= 2.7
            torch.cuda.reset_peak_host_memory_stats()


def cuda_stats(device: torch.device) -> dict[str, int]:
    """Allocated/reserved now and allocated peak since the last reset, in bytes; and torch's pinned host pool (page-locked
    host memory: gloo's staging of CUDA tensors, fast_read's buffers), now and at its peak."""
    if not cuda_active(device):
        return {}
    import torch

    torch.cuda.synchronize(device)
    return {
        "cuda_allocated": torch.cuda.memory_allocated(device),
        "cuda_reserved": torch.cuda.memory_reserved(device),
        "cuda_peak_allocated": torch.cuda.max_memory_allocated(device),
        "cuda_peak_reserved": torch.cuda.max_memory_reserved(device),
        **(pinned_pool(torch.cuda.host_memory_stats()) if hasattr(torch.cuda, "host_memory_stats") else {}),
    }


def pinned_pool(stats: dict[str, int]) -> dict[str, int]:
    """The pinned host pool's bytes (blocks in use and cached). torch <= 2.12 names it reserved_bytes (allocated_bytes:
    in use); 2.13 renamed it allocated_bytes (active_bytes: in use)."""
    key = "reserved_bytes" if "reserved_bytes.current" in stats else "allocated_bytes"
    return {
        "cuda_pinned": int(stats.get(f"{key}.current", 0)),
        "cuda_peak_pinned": int(stats.get(f"{key}.peak", 0)),
        "cuda_pinned_blocks": int(stats.get("num_host_alloc", 0)) - int(stats.get("num_host_free", 0)),
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

    def process_used_bytes(self, index: int, pid: int) -> int | None:
        """What the device holds for process `pid` (its CUDA context and allocations); None where NVML cannot say
        (a container's own pid namespace)."""
        if index >= len(self.handles):
            return None
        try:
            procs = self._pynvml.nvmlDeviceGetComputeRunningProcesses(self.handles[index])
        except Exception:
            return None
        used = [p.usedGpuMemory for p in procs if p.pid == pid and p.usedGpuMemory is not None]
        return int(used[0]) if used else None


def cuda_context(device: torch.device) -> int | None:
    """The CUDA context this rank's card holds for it, created now if not yet: NVML's figure for this process less
    torch's reserve; None where NVML cannot see the process (a container's own pid namespace)."""
    import os

    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    torch.cuda.synchronize(device)
    held = Nvml().process_used_bytes(index, os.getpid())
    return None if held is None else held - torch.cuda.memory_reserved(device)


def cap_allocator(device: torch.device, gpu_bytes: int, context: int) -> dict[str, float]:
    """Cap this rank's torch allocator so that allocator and CUDA context together stay within `gpu_bytes`, as one
    card of that size would count them (machine.emulate)."""
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    allowed = max(gpu_bytes - context, 0)
    torch.cuda.set_per_process_memory_fraction(min(allowed / total, 1.0), device)
    gib = 1024**3
    return {"cap_gib": round(gpu_bytes / gib, 3), "allocator_cap_gib": round(allowed / gib, 3), "card_gib": round(total / gib, 3)}
