"""The machine a plan is checked against: this host (`machine=local`) or a declared node (a preset or fields).

Host figures are per node; `gpus` above one node's GPUs spans nodes, each holding an equal share of the ranks.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.schema import RunSettings
from rlhf_exp.config.units import GIB

DECLARED_CORES_PER_GPU = 16  # DGX A100/H100/H200: 128 or more cores for 8 GPUs


@dataclass(frozen=True)
class Target:
    name: str
    device: str  # cuda | cpu: what the ranks run on there
    host_total_bytes: float  # one node's memory (MemTotal here, or declared)
    host_bytes: float  # what a plan may use per node: (MemAvailable here, or the declared total) x plan.host_fraction
    gpu_bytes: float | None  # one GPU's memory (None: CPU ranks)
    gpus_per_node: int
    nodes: int
    ranks_per_node: int
    ranks_per_gpu: int = 1
    read_here: bool = True  # figures read from this host, not declared
    cores: int = 0  # CPU cores per node (0: DECLARED_CORES_PER_GPU x gpus_per_node)

    def cores_per_node(self) -> int:
        return self.cores or DECLARED_CORES_PER_GPU * self.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        where = "this host" if self.read_here else f"machine={self.name}"
        gpu = f", {self.gpus_per_node} x {self.gpu_bytes / GIB:.1f} GiB GPU" if self.gpu_bytes else ", CPU ranks"
        share = f" ({self.ranks_per_gpu} ranks per GPU)" if self.ranks_per_gpu > 1 else ""
        return (
            f"{where}: {self.nodes} node(s) x {self.ranks_per_node} rank(s), host {self.host_total_bytes / GIB:.0f} GiB per node "
            f"({self.host_bytes / GIB:.1f} GiB usable){gpu}{share}"
        )


def _split(gpus: int, per_node: int, nodes: int | None) -> tuple[int, int]:
    """(nodes, ranks per node) for `gpus` ranks on nodes of `per_node` GPUs."""
    nodes = nodes or math.ceil(gpus / per_node)
    if gpus % nodes:
        raise ConfigError(f"machine.nodes: {gpus} ranks do not split evenly over {nodes} nodes; valid: a divisor of gpus")
    if gpus // nodes > per_node:
        least = math.ceil(gpus / per_node)
        raise ConfigError(f"machine.nodes: {gpus // nodes} ranks per node but {per_node} GPUs per node; valid: at least {least}")
    return nodes, gpus // nodes


def declared_target(settings: RunSettings, device: str | None = None) -> Target:
    """A node described by machine.* alone (nothing is read from this host): planning from a laptop or login node."""
    m = settings.machine
    missing = [k for k in ("host_gib", "gpus_per_node") if getattr(m, k) is None]
    if missing:
        raise ConfigError(f"machine.{missing[0]}: not set for machine={m.name}; valid: a preset (a100-80g-8x, ...) or a value")
    device = device or ("cpu" if settings.device == "cpu" or m.gpu_gib is None else "cuda")
    nodes, per_node = _split(settings.gpus, m.gpus_per_node, m.nodes)
    host = m.host_gib * GIB
    gpu = m.gpu_gib * GIB if device == "cuda" and m.gpu_gib else None
    usable = host * settings.plan.host_fraction
    return Target(m.name, device, host, usable, gpu, m.gpus_per_node, nodes, per_node, read_here=False)


def local_target(
    settings: RunSettings, device: str, host_total: float, host_available: float, gpu_total: float | None, gpus_visible: int
) -> Target:
    """This host, with any machine.* field the user set replacing what was read."""
    m = settings.machine
    nodes, ranks = _split(settings.gpus, m.gpus_per_node or settings.gpus, m.nodes)  # undeclared: every rank here
    per_node = m.gpus_per_node or (gpus_visible if device == "cuda" else ranks)
    total = m.host_gib * GIB if m.host_gib else host_total
    usable = (m.host_gib * GIB if m.host_gib else host_available) * settings.plan.host_fraction
    gpu = (m.gpu_gib * GIB if m.gpu_gib else gpu_total) if device == "cuda" else None
    # ranks sharing this host's cards; emulating a machine, each rank plays one of its cards (capped to machine.gpu_gib)
    shared = device == "cuda" and gpus_visible and not m.gpus_per_node and not m.emulate
    ranks_per_gpu = math.ceil(ranks / gpus_visible) if shared else 1
    return Target(m.name, device, total, usable, gpu, per_node, nodes, ranks, ranks_per_gpu, True, os.cpu_count() or 1)
