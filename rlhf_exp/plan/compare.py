"""Planned against measured, per stage, from one result.json: what the planner's tolerance is checked on.

Measured rank rise = the largest over ranks of (the stage's VmHWM - the rank's RSS once dist_init is done),
the same quantity as the plan's rank_rise_gib; node = the node's peak above the level before ranks started;
GPU = torch.cuda's peak allocated on the largest rank (the tolerance is checked on it), and NVML's peak of the
device (one rank per GPU only; shown beside the plan's device figure, which is what the fit check compares with
the card's memory).
"""

from __future__ import annotations

from typing import Any

from rlhf_exp.config.stages import DIST_INIT
from rlhf_exp.plan.terms import COMPARED, plan_stages

# host (rank and node): |measured - planned| <= max(HOST_REL_TOL x measured, HOST_ABS_TOL_GIB); README states the same
HOST_REL_TOL = 0.10
HOST_ABS_TOL_GIB = 0.5
# Node figures of CPU runs are checked one way (never under-planned): there the node's used memory above the
# baseline taken before ranks start moves by up to ~0.5 GiB between identical jobs (the previous job's processes
# still releasing memory, page cache turning over on a 2-core box), the size of the ranks' whole base footprint.
# And there a stage's node peak may still hold what the stage before it freed: on the CI sandbox the node's used
# memory fell by 0.04 GiB while the ranks' RSS fell by 0.57 GiB at naive's load -> init (the kernel's figure lags
# the frees), so such a stage is bounded by its own plan or the previous stage's, whichever is larger.
# GPU per rank: within GPU_REL_TOL of the measured (or GPU_ABS_TOL_GIB for stages that hold almost nothing)
GPU_REL_TOL = 0.05
GPU_ABS_TOL_GIB = 0.25


def host_within(measured: float, planned: float) -> bool:
    return abs(measured - planned) <= max(HOST_REL_TOL * measured, HOST_ABS_TOL_GIB)


def gpu_within(measured: float | None, planned: float) -> bool:
    return measured is None or abs(measured - planned) <= max(GPU_REL_TOL * measured, GPU_ABS_TOL_GIB)


def compare(result: dict[str, Any], node_noise_gib: float = 0.0) -> list[dict[str, Any]]:
    """One row per planned stage that was measured: planned and measured rank rise, node peak and GPU (GiB), checked
    against the tolerance; and every other figure the plan declares `compared` (terms.py), shown beside its measure.

    `node_noise_gib`: what the rest of the machine moved the node's used memory by during the job, measured beside
    it (tests/node_noise.py); a node figure takes it in, so a CPU run's node check allows it on top."""
    plan = {st.stage: st for st in plan_stages(result.get("plan"))}
    rows = {row["stage"]: row for row in result["stages"]}
    after_dist = [name for name in rows if name != DIST_INIT]
    if not plan or not after_dist:
        return []
    base = {r["rank"]: r["rss_begin_gib"] for r in rows[after_dist[0]]["per_rank"]}
    one_rank_per_gpu = result.get("device") == "cuda" and not (result.get("config") or {}).get("share_gpus")
    out = []
    before = 0.0  # the previous stage's planned node peak
    for name, planned in plan.items():
        row = rows.get(name)
        before, previous = planned.node_peak_gib, before
        if name == DIST_INIT or row is None or row["status"] != "ok":
            continue
        rise = max(r["peak_rss_gib"] - base[r["rank"]] for r in row["per_rank"])
        gpu = row.get("gpu_cuda_peak_allocated_gib") if result.get("device") == "cuda" else None
        device = row.get("gpu_nvml_peak_gib") if one_rank_per_gpu else None
        node = row.get("node_peak_gib")
        checks = [host_within(rise, planned.rank_rise_gib), gpu_within(gpu, planned.gpu_rank_gib)]
        if node is not None and result.get("device") == "cuda":
            checks.append(host_within(node, planned.node_peak_gib))
        elif node is not None:  # CPU runs: one way, never under-planned; what the stage before freed may linger
            bound = max(planned.node_peak_gib, previous)
            checks.append(node <= bound + max(HOST_REL_TOL * node, HOST_ABS_TOL_GIB) + node_noise_gib)
        out.append(
            {
                "stage": name,
                "rank_rise_planned": planned.rank_rise_gib,
                "rank_rise_measured": round(rise, 4),
                "node_planned": planned.node_peak_gib,
                "node_measured": node,
                "node_net_measured": row.get("node_net_peak_gib"),
                "gpu_planned": planned.gpu_rank_gib,
                "gpu_measured": gpu,
                "gpu_device_planned": planned.gpu_device_gib,
                "gpu_device_measured": device,
                **{f"{name}_planned": getattr(planned, name) for name in COMPARED},
                **{f"{name}_measured": row.get(key) for name, (key, _) in COMPARED.items()},
                "ok": all(checks),
            }
        )
    return out
