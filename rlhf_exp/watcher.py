"""The watcher: a separate process sampling node and per-rank memory into samples.jsonl.

`python -m rlhf_exp.watcher <job_dir> --parent PID --interval 0.02`. Runs until <job_dir>/stop
appears or the parent (the job) dies. A sampler thread inside a busy rank misses load peaks
(DESIGN.md): this process only samples. Each line is one sample, flushed as taken:
  {"t", "node_used", "cgroup_usage", "ranks": {rank: {"pid", "rss", "rss_file", "pss_anon"}}, "gpu_used": [...]}
Ranks are found as descendants of the parent that carry a RANK variable.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import psutil

from rlhf_exp import kernel_memory
from rlhf_exp.gpu_memory import Nvml


class RankFinder:
    """Maps rank number -> pid among the parent's descendants, caching each pid's RANK once."""

    def __init__(self, parent: int) -> None:
        self.parent = psutil.Process(parent)
        self.rank_of: dict[int, int | None] = {}

    def ranks(self) -> dict[int, int]:
        try:
            children = self.parent.children(recursive=True)
        except psutil.NoSuchProcess:
            return {}
        found: dict[int, int] = {}
        for child in children:
            if child.pid not in self.rank_of:
                try:
                    env = child.environ()
                    is_rank = "rlhf_exp.rank_main" in " ".join(child.cmdline())
                    self.rank_of[child.pid] = int(env["RANK"]) if is_rank and "RANK" in env else None
                except (psutil.Error, KeyError, ValueError):
                    continue  # not readable yet (just forked): try again next sample
            rank = self.rank_of[child.pid]
            if rank is not None:
                found[rank] = child.pid
        return found


def take_sample(finder: RankFinder, cgroup: kernel_memory.CgroupMemory, nvml: Nvml) -> dict[str, Any]:
    sample: dict[str, Any] = {"t": time.time(), "node_used": kernel_memory.node_used_bytes()}
    usage = cgroup.usage_bytes()
    if usage is not None:
        sample["cgroup_usage"] = usage
    ranks: dict[str, dict[str, int]] = {}
    for rank, pid in finder.ranks().items():
        status = kernel_memory.process_status(pid)
        smaps = kernel_memory.process_smaps(pid)
        if status:
            ranks[str(rank)] = {
                "pid": pid,
                "rss": status.get("VmRSS", 0),
                "rss_file": status.get("RssFile", 0),
                "pss_anon": smaps.get("Pss_Anon", 0),
            }
    sample["ranks"] = ranks
    if nvml.handles:
        sample["gpu_used"] = nvml.all_used_bytes()
    return sample


def watch(job_dir: Path, parent: int, interval: float) -> None:
    finder, cgroup, nvml = RankFinder(parent), kernel_memory.CgroupMemory(), Nvml()
    stop = job_dir / "stop"
    with open(job_dir / "samples.jsonl", "a", buffering=1) as out:
        out.write(json.dumps({"header": True, "cgroup": cgroup.describe(), "interval_s": interval}) + "\n")
        while not stop.exists() and psutil.pid_exists(parent):
            out.write(json.dumps(take_sample(finder, cgroup, nvml)) + "\n")
            time.sleep(interval)
        out.write(json.dumps(take_sample(finder, cgroup, nvml)) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("job_dir", type=Path)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--interval", type=float, default=0.02)
    args = parser.parse_args()
    watch(args.job_dir, args.parent, args.interval)


if __name__ == "__main__":
    main()
