"""Engine weights compared between loaders: every job's sha256 per weight (verify_weights=true), after the engine
and after the PPO steps, against the first job of the same run."""

from __future__ import annotations

from bench.scenario import Context
from bench.tools.tables import markdown


def table(ctx: Context) -> str:
    """Within each run (one ZeRO stage), every job against the run's first."""
    jobs = [j for j in ctx.completed() if (j.job_dir / "weights").is_dir()]
    rows = []
    for run in dict.fromkeys(j.run for j in jobs):
        first, *others = [j for j in jobs if j.run == run]
        for job in others:
            for ref in sorted((first.job_dir / "weights").glob("*.json")):
                other = job.job_dir / "weights" / ref.name
                same = other.exists() and other.read_bytes() == ref.read_bytes()
                rows.append({"run": run, "weights": ref.stem, "loader": job.label, "against": first.label,
                             "identical": "yes" if same else "NO"})  # fmt: skip
    if not rows:
        return f"{len(jobs)} job(s) with weight digests: nothing to compare\n"
    copied = {
        j.label: ", ".join(f"{s['stage']}<-{s['copied_from']}" for s in j.result["stages"] if s.get("copied_from")) for j in jobs
    }
    lines = [f"- {label}: copied {c}" for label, c in copied.items() if c]
    return markdown(rows) + ("\n" + "\n".join(lines) + "\n" if lines else "")
