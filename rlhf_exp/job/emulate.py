"""machine.emulate for one node's job: the host cap set up before its ranks start and its record afterwards.

The mechanisms are in memory/emulation.py; the GPU cap is set by each rank (rank/main.py).
"""

from __future__ import annotations

from typing import Any

from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.schema import RunSettings
from rlhf_exp.memory.emulation import HostCap, cgroup_oom_kills, host_cap_bytes, make_job_cgroup, remove_job_cgroup
from rlhf_exp.memory.kernel import node_total_bytes


def host_cap(settings: RunSettings, name: str) -> HostCap | None:
    """This node's host cap (None when not emulating or the machine sets no host memory): the job's cgroup where
    `machine.emulate_host_with` allows one and this host does, else the watchdog's."""
    machine = settings.machine
    if not machine.emulate or machine.host_gib is None:
        return None
    cap = host_cap_bytes(machine.host_gib, settings.plan.host_fraction)
    made = make_job_cgroup(name, cap) if machine.emulate_host_with != "watchdog" else None
    if made is None and machine.emulate_host_with == "cgroup":
        raise ConfigError(
            "machine.emulate_host_with: cgroup, but this host lets this process make no memory cgroup of its own; "
            "valid: auto or watchdog (the watchdog then holds the job to the cap)"
        )
    return made or HostCap(round(cap / 2**30, 3), "watchdog")


def check_host_cap(settings: RunSettings, name: str) -> None:
    """Before anything is written: a cgroup asked for explicitly can be made here (made and removed again)."""
    if settings.machine.emulate and settings.machine.emulate_host_with == "cgroup":
        made = host_cap(settings, name)
        if made is not None:
            remove_job_cgroup(made.path)


def emulation_record(settings: RunSettings, device: str, host: HostCap | None) -> dict[str, Any] | None:
    """result.json's `emulation`: the machine emulated and each cap, with how it was enforced."""
    machine = settings.machine
    if not machine.emulate:
        return None
    gpu = None
    if machine.gpu_gib is not None:
        enforced = "torch allocator (set_per_process_memory_fraction), CUDA context counted" if device == "cuda" else None
        gpu = {"cap_gib": machine.gpu_gib, "by": enforced or "not enforced: the ranks run on the CPU"}
    host_part = None
    if host:
        above = host.cap_gib * 2**30 > node_total_bytes()  # a target bigger than this host: this host's limit comes first
        host_part = {**host.to_dict(), "oom_kills": cgroup_oom_kills(host.path), "above_this_host": above}
    return {"machine": machine.name, "host": host_part, "gpu": gpu}


def oom_verdict(emulation: dict[str, Any] | None) -> str | None:
    """What killed a rank when the kernel's OOM killer acted inside the job's cgroup (a failure's reason names it)."""
    host = (emulation or {}).get("host") or {}
    if host.get("oom_kills"):
        return f"the kernel's OOM killer inside the emulated host cap ({host['cap_gib']} GiB, {host['by']})"
    return None
