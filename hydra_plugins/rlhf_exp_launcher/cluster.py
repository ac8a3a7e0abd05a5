"""What the SLURM cluster offers (sinfo), and a sweep's requests checked against it before any job is submitted: an
unknown partition or a job no node of the partition can hold is one line naming the key, not sbatch's refusal after
other jobs of the sweep were already submitted."""

import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

GPU_GRES = re.compile(r"gpu(?::[^:,()]+)?:(\d+)")


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    nodes: int
    cpus: int  # per node
    mem_mib: int  # per node
    gpus: int  # per node: the gpu gres count


def _int(text: str) -> int:
    digits = re.match(r"\d+", text.strip())
    return int(digits.group()) if digits else 0


def partitions() -> dict[str, Partition] | None:
    """The cluster's partitions by name (the smallest node of each), or None where sinfo cannot be asked."""
    if shutil.which("sinfo") is None:
        return None
    proc = subprocess.run(["sinfo", "-h", "-o", "%P|%D|%c|%m|%G"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return None
    found: dict[str, Partition] = {}
    for line in proc.stdout.splitlines():
        fields = line.split("|")
        if len(fields) != 5:
            continue
        name, nodes, cpus, mem, gres = fields
        gpus = sum(int(n) for n in GPU_GRES.findall(gres))
        part = Partition(name.rstrip("*"), name.endswith("*"), _int(nodes), _int(cpus), _int(mem), gpus)
        old = found.get(part.name)  # one line per node state: keep the node count, the smallest node
        if old is not None:
            part = Partition(
                part.name,
                part.default or old.default,
                part.nodes + old.nodes,
                min(part.cpus, old.cpus),
                min(part.mem_mib, old.mem_mib),
                min(part.gpus, old.gpus),
            )
        found[part.name] = part
    return found


def _mem_mib(request: str) -> int:
    """sbatch's --mem value ("4096M", "8G", "1T") in MiB."""
    number, unit = re.fullmatch(r"(\d+)([KMGT]?)", request.strip().upper()).groups()  # type: ignore[union-attr]
    return int(number) * {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2}[unit]


def check_request(
    cluster: dict[str, Partition],
    partition: str | None,
    job: str,
    resources: dict[str, Any],
) -> str | None:
    """The one-line refusal of one job's request (job: how to name it, e.g. "gpus=8"), or None when a node of the
    partition can hold it."""
    if partition is not None and partition not in cluster:
        return f"hydra.launcher.partition: no partition {partition!r} on this cluster; valid: {', '.join(sorted(cluster))}"
    name = partition or next((p.name for p in cluster.values() if p.default), None)
    if name is None:
        return f"hydra.launcher.partition: this cluster has no default partition; valid: {', '.join(sorted(cluster))}"
    part = cluster[name]
    where = f"partition {name!r} has"
    nodes, gpus = int(resources["nodes"]), resources.get("gpus_per_node")
    if nodes > part.nodes:
        return f"{job}: asks for {nodes} nodes, {where} {part.nodes}; valid: fewer gpus, or another hydra.launcher.partition"
    if gpus and gpus > part.gpus:
        return (
            f"{job}: asks for {gpus} GPUs per node, {where} {part.gpus} per node; valid: "
            f"hydra.launcher.gpus_per_node_max={part.gpus} (the job spans nodes), or another hydra.launcher.partition"
        )
    cpus = int(resources.get("cpus_per_task") or 0)
    if part.cpus and cpus > part.cpus:
        return f"{job}: asks for {cpus} CPUs per node, {where} {part.cpus}; valid: a smaller hydra.launcher.cpus_per_rank"
    mem = resources.get("slurm_mem") or resources.get("mem_gb")
    need = _mem_mib(str(mem)) if isinstance(mem, str) else int(mem or 0) * 1024
    if part.mem_mib and need > part.mem_mib:
        return (
            f"{job}: asks for {need} MiB of host memory per node, {where} {part.mem_mib} MiB; valid: a node with more "
            "(hydra.launcher.partition), or a smaller hydra.launcher.mem_gb"
        )
    return None


def first_refusal(
    cluster: dict[str, Partition] | None,
    partition: str | None,
    jobs: list[tuple[str, dict[str, Any]]],  # (how to name the job, its resources)
) -> str | None:
    """The first job of the sweep the cluster cannot take, as its one line; None when every one fits (or where sinfo
    cannot be asked: sbatch decides then)."""
    if cluster is None:
        return None
    return next((line for job, resources in jobs if (line := check_request(cluster, partition, job, resources))), None)
