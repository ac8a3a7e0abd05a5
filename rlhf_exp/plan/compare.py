"""Planned against measured, per stage, from one result.json: what the planner's tolerance is checked on.

Measured rank rise = the largest over ranks of (the stage's VmHWM - the rank's RSS once dist_init is done),
the same quantity as the plan's rank_rise_gib; node = the node's peak above the level before ranks started.
"""

from __future__ import annotations

from typing import Any

from rlhf_exp.config.stages import DIST_INIT

# |measured - planned| must stay within max(REL_TOL x planned, ABS_TOL_GIB); README states the same
REL_TOL = 0.35
ABS_TOL_GIB = 0.15
# node-wide, one way only (measured <= planned + max(REL_TOL x planned, NODE_ABS_TOL_GIB)): the node's used
# memory includes everything else on the machine, and identical jobs differ by up to ~0.4 GiB on a 2-core box
NODE_ABS_TOL_GIB = 0.3


def within(measured: float, planned: float) -> bool:
    return abs(measured - planned) <= max(REL_TOL * planned, ABS_TOL_GIB)


def compare(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per planned stage that was measured: planned and measured rank rise and node peak (GiB)."""
    plan = {st["stage"]: st for st in (result.get("plan") or {}).get("stages", [])}
    rows = {row["stage"]: row for row in result["stages"]}
    after_dist = [name for name in rows if name != DIST_INIT]
    if not plan or not after_dist:
        return []
    base = {r["rank"]: r["rss_begin_gib"] for r in rows[after_dist[0]]["per_rank"]}
    out = []
    for name, planned in plan.items():
        row = rows.get(name)
        if name == DIST_INIT or row is None or row["status"] != "ok":
            continue
        rise = max(r["peak_rss_gib"] - base[r["rank"]] for r in row["per_rank"])
        out.append(
            {
                "stage": name,
                "rank_rise_planned": planned["rank_rise_gib"],
                "rank_rise_measured": round(rise, 4),
                "node_planned": planned["node_peak_gib"],
                "node_measured": row.get("node_peak_gib"),
                "gpu_planned": planned["gpu_rank_gib"],
                "gpu_measured": row.get("gpu_cuda_peak_allocated_gib"),  # torch.cuda peak, largest rank
                "ok": within(rise, planned["rank_rise_gib"]),
            }
        )
    return out
