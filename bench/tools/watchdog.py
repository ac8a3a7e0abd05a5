"""The watchdog against the kernel: consecutive runs that must all be stopped by the watchdog, never by the OOM killer,
with the node figure kept below MemTotal - 2 GiB (issue: "a watchdog that always wins")."""

from __future__ import annotations

import os
from pathlib import Path

from bench.scenario import Context
from bench.tools.tables import markdown
from rlhf_exp.memory import kernel

HEADROOM_GIB = 2.0  # the node figure must stay this far below MemTotal


def thp_mode() -> str:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "unknown"
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else text.strip()


def what_the_kernel_offers(ctx: Context) -> None:
    """Which of the kernel's means a job could use here: a cgroup it may limit, pressure stall information."""
    cgroup = kernel.CgroupMemory()
    writable = bool(cgroup.path and cgroup.version == 2 and os.access(cgroup.path, os.W_OK))
    ctx.facts.update(
        cgroup=cgroup.describe(),
        cgroup_v2_writable=writable,
        psi=Path("/proc/pressure/memory").exists(),
        thp=thp_mode(),
        mem_total_gib=round(kernel.node_total_bytes() / 2**30, 2),
        oom_kill_since_boot=kernel.oom_kill_count(),
    )


def row(k: int, result: dict | None) -> dict:
    if not result:
        return {"run": k, "status": "no result.json"}
    failure = result.get("failure") or {}
    records = result.get("watchdog") or [{}]
    record = records[0]
    trip = record.get("trip") or {}
    baseline = (result.get("baseline") or {}).get("node_used_gib") or 0.0
    sampled = baseline + (result.get("node_peak_gib") or 0.0)  # the watcher's samples, absolute
    peak = max(sampled, record.get("node_peak_gib") or 0.0)  # and the watchdog's 10 ms polls
    total = record.get("mem_total_gib") or result.get("host_total_gib")
    return {
        "run": k,
        "status": result["status"],
        "stopped by": failure.get("process") or failure.get("signal") or ("-" if not failure else "rank"),
        "stage": failure.get("stage"),
        "trip GiB": trip.get("node_used_gib"),
        "projected GiB": trip.get("projected_gib"),
        "limit GiB": record.get("limit_gib"),
        "node peak GiB": round(peak, 2),
        f"MemTotal-{HEADROOM_GIB:g} GiB": round(total - HEADROOM_GIB, 2) if total else None,
        "ranks killed": len(record.get("killed") or []),
        "OOM kills": sum(r.get("oom_kills") or 0 for r in records),
        "wall s": result.get("wall_s"),
    }


def won(r: dict) -> bool:
    limit = r.get(f"MemTotal-{HEADROOM_GIB:g} GiB")
    return (
        r.get("stopped by") == "watchdog"
        and bool(r.get("stage"))
        and r.get("OOM kills") == 0
        and (limit is not None and r["node peak GiB"] <= limit)
    )


def table(ctx: Context) -> str:
    rows = [row(k, job.result) for k, job in enumerate(ctx.jobs, 1)]
    wins = sum(won(r) for r in rows)
    facts = ", ".join(f"{k}: {v}" for k, v in ctx.facts.items())
    head = (
        f"{wins} of {len(rows)} runs stopped by the watchdog with the stage named, no OOM kill, node figure at most "
        f"MemTotal - {HEADROOM_GIB:g} GiB. This host: {facts}"
    )
    return markdown(rows, head)
