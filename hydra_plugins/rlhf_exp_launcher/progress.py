"""The console while a sweep's SLURM jobs run: each job's SLURM state as it changes, and each stage as the job's
rank 0 ends it (from the job dir's events, as the local console shows them: rlhf_exp/job/progress.py)."""

import json
import time
from pathlib import Path
from typing import Any


def _new_stage_lines(job_dir: Path, seen: dict[Path, int]) -> list[str]:
    from rlhf_exp.jobdir import JobDir
    from rlhf_exp.records import Event

    path = JobDir(job_dir).rank_events_file(0)
    if not path.exists():
        return []
    lines, out = path.read_text().splitlines(), []
    for line in lines[seen.get(job_dir, 0) :]:
        try:
            ev = Event.from_json(json.loads(line))
        except json.JSONDecodeError:
            break  # being written: next poll
        seen[job_dir] = seen.get(job_dir, 0) + 1
        if ev.closes_stage:
            mark = "✓" if ev.event == "end" else "✗"
            took = f" {ev.duration_s:.1f} s" if ev.duration_s is not None else ""
            out.append(f"  {job_dir.name}: {mark} {ev.stage}{took}")
    return out


def watch_jobs(jobs: list[tuple[Any, Path]], poll_s: float = 2.0) -> None:
    """Print what changes until every submitit job of `jobs` (with its job dir) is done."""
    states: dict[str, str] = {}
    seen: dict[Path, int] = {}
    while True:
        running = False
        for job, job_dir in jobs:
            state = job.state
            if states.get(job.job_id) != state:
                states[job.job_id] = state
                print(f"  SLURM job {job.job_id} ({job_dir.name}): {state}", flush=True)
            for line in _new_stage_lines(job_dir, seen):
                print(line, flush=True)
            running |= not job.done()
        if not running:
            return
        time.sleep(poll_s)
