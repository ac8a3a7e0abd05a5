"""Running as if on the target machine (`machine.emulate=true`): its host memory and its GPU memory as caps.

Host: the job's ranks may hold `machine.host_gib x plan.host_fraction` per node, the share the planner lets a job
use (the rest is the target's system). Two ways, in this order where `machine.emulate_host_with=auto`:
- a memory cgroup of the job's own under this process's (v2 `memory.max`, v1 `memory.limit_in_bytes`), which every
  rank joins as it starts: the kernel reclaims page cache first and, at the cap, its OOM killer kills a rank, as on
  the target node. Made where the cgroup tree is writable (a root container, a delegated systemd scope).
- else the watchdog (memory/watchdog.py) stops the ranks when the node's used memory rises the cap above the level
  before the ranks started: exact, no projection.
GPU: each rank's torch allocator capped with `torch.cuda.set_per_process_memory_fraction` at `machine.gpu_gib` less
the CUDA context this rank's card holds for it (NVML's figure for the process less torch's reserve), as the target
card would count it; ranks sharing a card are each capped at one target GPU.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from rlhf_exp.config.units import GIB
from rlhf_exp.memory.kernel import cgroup_dir

CGROUP_ENV = "RLHF_EXP_JOB_CGROUP"  # the job's cgroup dir, for the ranks to join


@dataclass
class HostCap:
    """How this node's host cap is enforced (result.json's `emulation.host`)."""

    cap_gib: float
    by: str  # "cgroup v2 memory.max", "cgroup v1 memory.limit_in_bytes" or "watchdog"
    path: str | None = None  # the job's cgroup

    def to_dict(self) -> dict:
        return asdict(self)


def host_cap_bytes(host_gib: float, host_fraction: float) -> int:
    return int(host_gib * host_fraction * GIB)


def make_job_cgroup(name: str, cap_bytes: int) -> HostCap | None:
    """A memory cgroup for the job's ranks under this process's, capped; None where this host does not allow it."""
    found = cgroup_dir()
    if found is None:
        return None
    parent, version = found
    path = parent / name
    limit = "memory.max" if version == 2 else "memory.limit_in_bytes"
    try:
        path.mkdir(exist_ok=True)
        (path / limit).write_text(str(cap_bytes))
    except OSError:
        remove_job_cgroup(path)
        return None
    return HostCap(round(cap_bytes / GIB, 3), f"cgroup v{version} {limit}", str(path))


def join_job_cgroup() -> None:
    """A rank joins its job's cgroup before it allocates (its imports included), so all it holds is charged there."""
    path = os.environ.get(CGROUP_ENV)
    if path:
        (Path(path) / "cgroup.procs").write_text(str(os.getpid()))


def cgroup_oom_kills(path: str | None) -> int:
    """OOM kills inside the job's cgroup: v2 memory.events oom_kill, v1 memory.oom_control oom_kill."""
    if not path:
        return 0
    for name in ("memory.events", "memory.oom_control"):
        try:
            for line in (Path(path) / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return 0


def remove_job_cgroup(path: str | Path | None) -> None:
    """The job's cgroup, once its ranks have exited (an empty cgroup's dir is removed with rmdir)."""
    if path:
        try:
            Path(path).rmdir()
        except OSError:
            pass
