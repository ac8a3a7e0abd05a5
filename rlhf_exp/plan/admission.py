"""Scheduler admission: the memory a SLURM job asks for per node, from its own plan.

SLURM places (or refuses) a job by what it asks for; asked for by the plan, two jobs of one sweep that will use
different memory ask for different amounts. The request is the plan's node peak plus MARGIN of it plus
MARGIN_GIB: the plan's tolerance (bench/results/h200-plan-vs-measured/plan_vs_measured.md), and room for what runs in the job's
cgroup beside the ranks (the job driver, its watcher, srun).
"""

from __future__ import annotations

import math

from rlhf_exp.config.schema import RunSettings
from rlhf_exp.config.units import GIB
from rlhf_exp.plan.machine import Target
from rlhf_exp.plan.pipeline import plan_settings

MARGIN = 0.15
MARGIN_GIB = 1.0


def node_memory_request_mib(settings: RunSettings, device: str, nodes: int, ranks_per_node: int) -> int:
    """MiB of host memory to ask per node for a job of `settings` split as the launcher splits it."""
    m = settings.machine
    host = (m.host_gib or math.inf) * GIB
    gpu = m.gpu_gib * GIB if device == "cuda" and m.gpu_gib else None
    # capacity only steers loader=auto; unknown until the job lands on a node, so the declared machine or unlimited
    target = Target(
        m.name, device, host, host * settings.plan.host_fraction, gpu, ranks_per_node, nodes, ranks_per_node, 1, False
    )
    planned = plan_settings(settings, device, target=target)
    peak = planned.plans[planned.picked()].node_peak_gib()
    return math.ceil((peak * (1 + MARGIN) + MARGIN_GIB) * 1024)
