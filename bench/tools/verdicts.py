"""Where each job ended beside where its plan said it would: the fit check's verdict against the run (emulated
runs: the target's caps), then each job's stage table."""

from __future__ import annotations

from typing import Any

from bench.scenario import Context
from bench.tools import stages
from bench.tools.tables import markdown
from rlhf_exp.plan.fit import verdict_of


def plan_says(result: dict[str, Any]) -> str:
    return verdict_of((result.get("plan") or {}).get("first_misfit"))


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
