"""The console while a sweep's SLURM jobs run: each job's SLURM state as it changes, and each stage as the job's
rank 0 ends it (from the job dir's events, as the local console shows them: rlhf_exp/job/progress.py)."""

import time
from pathlib import Path
from typing import Any


def watch_jobs(jobs: list[tuple[Any, Path]], poll_s: float = 0.5) -> None:
    """Print what changes until every submitit job of `jobs` (with its job dir) is done."""
    from rlhf_exp.jobdir import JobDir, JsonlTail
    from rlhf_exp.records import Event

    states: dict[str, str] = {}
    events = {job_dir: JsonlTail(JobDir(job_dir).rank_events_file(0)) for _, job_dir in jobs}
    while True:
        running = False
        for job, job_dir in jobs:
            state = job.state
            if states.get(job.job_id) != state:
                states[job.job_id] = state
                print(f"  SLURM job {job.job_id} ({job_dir.name}): {state}", flush=True)
            for ev in map(Event.from_json, events[job_dir].new()):
                if ev.closes_stage:
                    took = f" {ev.duration_s:.1f} s" if ev.duration_s is not None else ""
                    print(f"  {job_dir.name}: {'✓' if ev.event == 'end' else '✗'} {ev.stage}{took}", flush=True)
            running |= not job.done()
        if not running:
            return
        time.sleep(poll_s)
