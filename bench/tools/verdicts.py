"""Where each job ended beside where its plan said it would: the fit check's verdict against the run (emulated
runs: the target's caps), then each job's stage table."""

from __future__ import annotations

from typing import Any

from bench.scenario import Context
from bench.tools import stages
from bench.tools.tables import markdown
from rlhf_exp.plan.fit import GPU_WITH_ERROR, gpu_fit_need
from rlhf_exp.plan.terms import plan_stages


def plan_says(result: dict[str, Any]) -> str:
    plan = result.get("plan") or {}
    if plan.get("fits", True):
        return "fits"
    row = next(st for st in plan_stages(plan) if st.stage == plan["first_misfit"])
    per_gpu, have = plan["machine"]["ranks_per_gpu"], plan.get("capacity_gpu_gib")
    for memory, gpu in (("GPU", row.gpu_need_gib * per_gpu), (GPU_WITH_ERROR, gpu_fit_need(row) * per_gpu)):
        if have and gpu > have:
            return f"does not fit at {row.stage} ({memory} {gpu:.2f} of {have:.2f} GiB)"
    return f"does not fit at {row.stage} (host {row.node_peak_gib:.2f} of {plan['capacity_host_gib']:.2f} GiB)"


def ended(result: dict[str, Any]) -> tuple[str, str | None]:
    """('completed' or 'failed at <stage>', the failure's reason)."""
    failure = result.get("failure") or {}
    if result["status"] == "completed":
        return "completed", None
    return f"failed at {failure.get('stage')}", (failure.get("reason") or "")[:160]


def table(ctx: Context) -> str:
    rows = []
    for job in ctx.jobs:
        if not job.result:
            rows.append({"run": job.run, "loader": job.label, "plan says": None, "run ended": "no result.json"})
            continue
        says, (where, reason) = plan_says(job.result), ended(job.result)
        right = (
            where == "completed" if says == "fits" else says.startswith(f"does not fit at {where.removeprefix('failed at ')} ")
        )
        emulation = job.result.get("emulation") or {}
        rows.append(
            {
                "run": job.run,
                "loader": job.label,
                "emulated": emulation.get("machine"),
                "plan says": says,
                "run ended": where,
                "where the plan said": "yes" if right else "NO",
                "reason": reason,
            }
        )
    return markdown(rows) + "\n" + stages.table(ctx)
