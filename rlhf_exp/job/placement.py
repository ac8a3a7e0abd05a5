"""Where this job process sits: alone on this host, or one node of a SLURM allocation.

One job process runs per node either way (the same driver: rlhf_exp/job/driver.py). Under SLURM the
rlhf_slurm launcher (or launchers/sbatch_rlhf_exp.sh) starts one task per node and marks it with
SLURM_NODE_TASK_MARKER; each node's job process is the elastic agent of that node's ranks, and the
agents meet at node 0 (torch's c10d rendezvous). Node 0 prepares the job and writes its result.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

SLURM_NODE_TASK_MARKER = "RLHF_EXP_SLURM_NODE_TASK"  # exported by the sbatch setup lines
RDZV_PORT_BASE = 29400  # c10d rendezvous port under SLURM: base + job id modulo 1000 (jobs sharing a node differ)


@dataclass(frozen=True)
class Placement:
    node: int  # this node's index (0: prepares the job and writes its result)
    nodes: int
    ranks_per_node: int
    run_id: str  # the same on every node of one run; tells a fresh spec.json from a stale one
    rdzv_endpoint: str  # host:port where the nodes' agents meet
    local_addr: str | None  # the address this node's agent advertises (None: its hostname)
    scheduler: str | None = None  # "slurm" when SLURM started this process

    @property
    def first(self) -> bool:
        return self.node == 0


def under_slurm() -> bool:
    return os.environ.get(SLURM_NODE_TASK_MARKER) == "1" and "SLURM_JOB_ID" in os.environ


def placement_here(gpus: int) -> Placement:
    """This process's placement for a job of `gpus` ranks."""
    if not under_slurm():
        return Placement(0, 1, gpus, uuid.uuid4().hex[:12], "127.0.0.1:0", "127.0.0.1")
    import submitit

    env = submitit.JobEnvironment()
    nodes = env.num_nodes
    if gpus % nodes:
        raise ValueError(f"gpus: {gpus} ranks do not split evenly over {nodes} SLURM nodes")
    job_id = os.environ["SLURM_JOB_ID"]
    port = RDZV_PORT_BASE + int(job_id) % 1000
    return Placement(env.node, nodes, gpus // nodes, f"slurm-{job_id}", f"{env.hostnames[0]}:{port}", None, "slurm")
