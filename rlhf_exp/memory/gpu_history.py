"""What made a stage's GPU peak: torch's CUDA allocation history replayed to the peak (profile_gpu_memory=true).

Per stage the caching allocator records every allocation and free with its Python stack
(`torch.cuda.memory._record_memory_history`); at the stage's end the trace is replayed from the bytes allocated when
the stage began, and the allocations live at the highest point are grouped by where they were made: the first frame
outside torch (a line of DeepSpeed, transformers, peft or this project). Allocations older than the stage are one
group ("held from earlier stages"), less what the stage freed of them before its peak. Recording slows a rank:
a diagnostic, off by default.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch

from rlhf_exp.config.units import GIB

MAX_ENTRIES = 2_000_000  # trace ring size: a 13B PPO step makes a few hundred thousand events
HELD = "held from earlier stages"
TOP = 15  # sites kept per stage


def start(device: torch.device) -> None:
    """A fresh history for the stage that begins (re-enabling clears the ring)."""
    torch.cuda.memory._record_memory_history(None, device=device)
    torch.cuda.memory._record_memory_history("all", context="all", stacks="python", max_entries=MAX_ENTRIES, device=device)


def _site(frames: list[dict[str, Any]]) -> str:
    """The innermost frame outside torch and Python's own library: where the caller asked for the memory."""
    for frame in frames:  # innermost first
        name = frame.get("filename", "")
        stdlib = "/lib/python3" in name and "site-packages" not in name
        wrapper = name.endswith("deepspeed/utils/nvtx.py")  # instrument_w_nvtx's wrapper: its caller says more
        if "/torch/" in name or name.startswith("<") or stdlib or wrapper:
            continue
        short = name.split("site-packages/")[-1]
        if "rlhf_exp/" in short:  # this project's files, from wherever the checkout is
            short = "rlhf_exp/" + short.split("rlhf_exp/", 1)[1]
        return f"{short}:{frame.get('line')} {frame.get('name')}"
    return "torch (no caller frame)"


def peak_sites(device: torch.device, allocated_at_begin: int) -> dict[str, Any]:
    """The stage's allocated peak replayed from its trace and the live allocations there, by site (GiB)."""
    snapshot = torch.cuda.memory._snapshot(device)
    torch.cuda.memory._record_memory_history(None, device=device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return replay(snapshot["device_traces"][index], allocated_at_begin)


def replay(trace: list[dict[str, Any]], allocated_at_begin: int) -> dict[str, Any]:
    """Allocations and frees in order from `allocated_at_begin` bytes: the highest point and what was live there.
    Two passes: the first finds the peak's event, the second rebuilds what was live there (no copy at every new high)."""
    allocated = peak = allocated_at_begin
    at = -1  # the event that reached the peak (-1: nothing rose above the start)
    for i, event in enumerate(trace):
        if event["action"] == "alloc":
            allocated += event["size"]
            if allocated > peak:
                peak, at = allocated, i
        elif event["action"] == "free_requested":
            allocated -= event["size"]
    live: dict[int, tuple[int, str]] = {}
    held = allocated_at_begin
    for event in trace[: at + 1]:
        action, addr, size = event["action"], event["addr"], event["size"]
        if action == "alloc":
            live[addr] = (size, _site(event.get("frames") or []))
        elif action == "free_requested" and live.pop(addr, None) is None:
            held -= size  # an allocation older than the stage
    sites: dict[str, int] = defaultdict(int)
    for size, site in live.values():
        sites[site] += size
    ranked = sorted(sites.items(), key=lambda kv: -kv[1])
    rows = [(HELD, held), *ranked[:TOP]]
    rest = sum(size for _, size in ranked[TOP:])
    if rest:
        rows.append((f"{len(ranked) - TOP} more sites", rest))
    return {
        "peak_allocated_gib": round(peak / GIB, 4),
        "events": len(trace),
        "sites": [[site, round(size / GIB, 4)] for site, size in rows],
    }
