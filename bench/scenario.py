"""What a scenario is: its configs declared once (GPU-sized and a CPU rehearsal's), its jobs, and its table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Run:
    """One group of app jobs: one job per loader (`loader` or `loader:variant`), the same overrides for each.
    Overrides may name the scenario's sizes as `{model}`, `{small}`, `{device}`, `{ranks}`, `{tokens}`."""

    name: str  # the sub-folder of the results folder
    loaders: tuple[str, ...]
    overrides: tuple[str, ...] = ()
    dry_loaders: tuple[str, ...] | None = None  # --dry-run's jobs; None: the first loader only


@dataclass
class JobResult:
    run: str
    label: str  # loader[:variant][@baseline]
    result: dict[str, Any] | None  # None: the job wrote no result.json
    job_dir: Path
    command: list[str]


@dataclass
class Context:
    """What a scenario's steps see: the sizes in force, where to write, the jobs' results, the options given."""

    scenario: Scenario
    sizes: Mapping[str, str]
    dry: bool
    out: Path  # the results folder
    work: Path  # job dirs (outside the tree: checkpoints and logs stay out of results/)
    repeat: int = 1
    baseline: Path | None = None  # an older source tree whose app runs beside this one's (a before/after in one run)
    ship: bool = False
    only: tuple[str, ...] = ()  # run only these loaders
    runs: tuple[str, ...] = ()  # run only these of the scenario's runs (by name)
    jobs: list[JobResult] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # what `prepare` measured

    def completed(self, run: str | None = None) -> list[JobResult]:
        return [j for j in self.jobs if j.result and j.result.get("status") == "completed" and run in (None, j.run)]


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str  # what it measures, for `python -m bench list` and RESULTS.md
    full: Mapping[str, str]  # the sizes on the GPU machine
    dry: Mapping[str, str]  # the smallest configuration, on CPU (--dry-run)
    table: Callable[[Context], str]  # markdown, from the jobs' results (and anything it measures itself)
    runs: tuple[Run, ...] = ()
    prepare: Callable[[Context], None] | None = None  # before the jobs (e.g. this machine's read limits)
    run_jobs: Callable[[Context], None] | None = None  # how its runs' jobs are run; None: each once (jobs.run_all)
    repeat: int = 1  # consecutive runs of every job unless --repeat says otherwise
    compares: bool = True  # --baseline runs the older tree's jobs beside these; False: this scenario's never
    pregenerate: bool = True  # False: its jobs generate their presets themselves (what first-run measures)
    models: Callable[[Mapping[str, str]], tuple[str, ...]] = lambda sizes: tuple(
        sizes[k] for k in ("model", "small") if k in sizes
    )  # presets generated before any timed job
