"""The job directory: the file protocol between a job's three kinds of process. Every file name is here.

  job process (rlhf_exp.job)      writes spec.json and plan.json before ranks start, result.json at the end,
                                  and `stop` to end the watcher
  ranks (rlhf_exp.rank)           read spec.json; append stage events to events/rank<N>.jsonl as they happen;
                                  write weights/<role>.json digests (verify_weights)
  watcher (rlhf_exp.memory)       appends samples.jsonl (samples.node<N>.jsonl on node N > 0); leaves
                                  stop_reason.json (watchdog) or watcher_error.txt for the job's guard;
                                  writes watchdog.json (watchdog.node<N>.json) as it stops
  logs/                           the ranks' stdout/stderr (torch's elastic launcher)
  job.log                         the job process's library logs and warnings (Hydra's job logging: hydra.job.name)
The shapes of the events and samples lines: rlhf_exp/records.py; of result.json's failure: `Failure` below.

Light on imports (no torch, no pydantic at import time): the watcher imports it too.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlhf_exp.records import Event, Sample, is_header

if TYPE_CHECKING:
    from rlhf_exp.config.schema import RunSettings

SPEC = "spec.json"
PLAN = "plan.json"
RESULT = "result.json"
EVENTS = "events"
LOGS = "logs"
WEIGHTS = "weights"
PROFILES = "profiles"
STOP = "stop"
STOP_REASON = "stop_reason.json"
WATCHDOG = "watchdog"  # watchdog.json, watchdog.node<N>.json: what each node's watchdog saw and did
WATCHER_PID = "watcher.pid"
WATCHER_ERROR = "watcher_error.txt"
JOB_LOG = "job.log"  # Hydra's job logging (hydra.job.name=job)
HYDRA_FILES = (".hydra", JOB_LOG)  # what Hydra writes into a run dir before the app starts
# everything a run writes; cleared together before a rerun into the same dir
RUN_FILES = (SPEC, PLAN, RESULT, STOP, STOP_REASON, WATCHER_PID, WATCHER_ERROR)
RUN_DIRS = (EVENTS, LOGS, WEIGHTS, PROFILES)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All complete JSON lines of a file (a process killed mid-write leaves a torn last line)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


class JsonlTail:
    """The JSON lines appended to a file since the last read, for readers that follow a running job: each read takes
    only the new bytes, and a line still being written waits for the next read."""

    def __init__(self, path: Path) -> None:
        self.path, self._at = path, 0

    def new(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self._at)
            chunk = fh.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._at += len(complete)
        rows = []
        for line in complete.splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # as read_jsonl: a line no reader can use is skipped
                continue
        return rows


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so a reader never sees half a file (readers poll for spec.json to appear)."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.rename(path)


@dataclass
class JobSpec:
    """What the job process decided before any rank started; every rank reads it."""

    settings: RunSettings  # validated; loader.name is the loader that runs (auto resolved)
    plan: dict[str, Any]  # the chosen loader's plan, with capacity and the verdict (plan.json)
    device: str  # cpu | cuda
    backend: str  # gloo | nccl
    checkpoints: dict[str, Path]  # "actor" and "critic" checkpoint directories
    config: dict[str, Any]  # the resolved config as composed (what resume compares)
    run_id: str  # the same on every node of one run (jobdir readers tell a fresh spec from a stale one)

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": self.settings.model_dump(),
            "plan": self.plan,
            "device": self.device,
            "backend": self.backend,
            "checkpoints": {k: str(v) for k, v in self.checkpoints.items()},
            "config": self.config,
            "run_id": self.run_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobSpec:
        from rlhf_exp.config.schema import RunSettings

        return cls(
            settings=RunSettings.model_validate(data["settings"]),
            plan=data["plan"],
            device=data["device"],
            backend=data["backend"],
            checkpoints={k: Path(v) for k, v in data["checkpoints"].items()},
            config=data["config"],
            run_id=data.get("run_id", ""),
        )


@dataclass(frozen=True)
class Failure:
    """result.json's `failure`: where and why a job did not complete (written by rlhf_exp.job, read by the reports)."""

    stage: str | None  # the stage the failing rank was in; "config", "prepare", "launch", "job" outside the ranks
    rank: int | None  # None: not a rank's fault (a check, the job process, a process the guard stopped the job for)
    reason: str
    signal: str | None = None
    exitcode: int | None = None
    process: str | None = None  # the process outside the ranks that the job was stopped for (watchdog, watcher)
    hung: bool | None = None  # a rank stopped inside a stage while its peers waited for it (True: they timed out)
    ranks_failed: list[dict[str, Any]] = field(default_factory=list)  # what the launcher saw of every failed rank

    def to_dict(self) -> dict[str, Any]:
        optional = ("process", "hung")  # present only where they say something
        return {k: v for k, v in asdict(self).items() if k not in optional or v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Failure | None:
        if not data:
            return None
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class JobDir:
    path: Path

    # --- paths -------------------------------------------------------------------------------------
    @property
    def spec_file(self) -> Path:
        return self.path / SPEC

    @property
    def plan_file(self) -> Path:
        return self.path / PLAN

    @property
    def result_file(self) -> Path:
        return self.path / RESULT

    @property
    def events_dir(self) -> Path:
        return self.path / EVENTS

    @property
    def logs_dir(self) -> Path:
        return self.path / LOGS

    def rank_events_file(self, rank: int) -> Path:
        return self.events_dir / f"rank{rank}.jsonl"

    def samples_file(self, node: int = 0) -> Path:
        """Node 0's samples are the job's node-wide figures; other nodes' watchers write beside them."""
        return self.path / ("samples.jsonl" if node == 0 else f"samples.node{node}.jsonl")

    def watchdog_file(self, node: int = 0) -> Path:
        return self.path / (f"{WATCHDOG}.json" if node == 0 else f"{WATCHDOG}.node{node}.json")

    def weights_file(self, name: str) -> Path:
        return self.path / WEIGHTS / f"{name}.json"

    def profile_file(self, rank: int) -> Path:
        """cProfile of one rank's engine build (profile=true); `python -m pstats` reads it."""
        return self.path / PROFILES / f"rank{rank}.prof"

    def gpu_memory_file(self, rank: int) -> Path:
        """One line per stage: what was live at the stage's GPU peak, by allocating line (profile_gpu_memory=true)."""
        return self.path / PROFILES / f"gpu_memory_rank{rank}.jsonl"

    # --- a run's lifecycle -------------------------------------------------------------------------
    def clear(self) -> None:
        """Remove a previous run's records, so events and samples are this run's alone."""
        self.path.mkdir(parents=True, exist_ok=True)
        for name in RUN_DIRS:
            shutil.rmtree(self.path / name, ignore_errors=True)
        for name in RUN_FILES:
            (self.path / name).unlink(missing_ok=True)
        for per_node in (*self.path.glob("samples*.jsonl"), *self.path.glob(f"{WATCHDOG}*.json")):
            per_node.unlink()

    def discard_if_only_hydra(self, stop_at: Path) -> bool:
        """A refused run leaves nothing: remove the run dir when it holds only Hydra's own files (none of a job's
        records, this run's or an earlier one's), then its parents that are left empty, up to `stop_at`."""
        if not self.path.is_dir() or any(p.name not in HYDRA_FILES for p in self.path.iterdir()):
            return False
        shutil.rmtree(self.path)
        parent, stop_at = self.path.parent, stop_at.resolve()
        while parent.resolve() != stop_at and stop_at in parent.resolve().parents and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
        return True

    def write_spec(self, spec: JobSpec) -> None:
        write_json_atomic(self.spec_file, spec.to_json())

    def has_spec(self) -> bool:
        return self.spec_file.exists()

    def read_spec(self) -> JobSpec:
        return JobSpec.from_json(json.loads(self.spec_file.read_text()))

    def wait_for_spec(self, run_id: str, timeout_s: float) -> JobSpec:
        """The spec node 0 writes for this run (`run_id`), once it appears."""
        deadline = time.time() + timeout_s
        while True:
            if self.has_spec():
                spec = self.read_spec()
                if spec.run_id == run_id:
                    return spec
            if time.time() > deadline:
                raise TimeoutError(f"no {self.spec_file} for run {run_id} within {timeout_s:.0f}s")
            time.sleep(0.2)

    def write_plan(self, plan: dict[str, Any]) -> None:
        write_json_atomic(self.plan_file, plan)

    def write_result(self, result: dict[str, Any]) -> None:
        write_json_atomic(self.result_file, result)

    def read_result(self) -> dict[str, Any] | None:
        """result.json, or None when absent or unreadable."""
        try:
            return json.loads(self.result_file.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    # --- records -----------------------------------------------------------------------------------
    def read_events(self) -> dict[int, list[Event]]:
        """Every rank's events so far, by rank."""
        files = sorted(self.events_dir.glob("rank*.jsonl"))
        return {int(p.stem.removeprefix("rank")): [Event.from_json(ev) for ev in read_jsonl(p)] for p in files}

    def read_samples(self, node: int = 0) -> list[Sample]:
        return [Sample.from_json(s) for s in read_jsonl(self.samples_file(node)) if not is_header(s)]

    def write_watchdog(self, node: int, record: dict[str, Any]) -> None:
        write_json_atomic(self.watchdog_file(node), record)

    def read_watchdogs(self) -> list[dict[str, Any]]:
        """Every node's watchdog record, node 0 first."""
        records = [json.loads(p.read_text()) for p in self.path.glob(f"{WATCHDOG}*.json")]
        return sorted(records, key=lambda r: r["node"])

    def write_weight_digests(self, name: str, digests: dict[str, str]) -> None:
        out = self.weights_file(name)
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(digests, indent=0, sort_keys=True))

    # --- signals between processes -------------------------------------------------------------------
    def request_watcher_stop(self) -> None:
        (self.path / STOP).touch()

    def watcher_stop_requested(self) -> bool:
        return (self.path / STOP).exists()

    def write_stop_reason(self, reason: str, t: float) -> None:
        (self.path / STOP_REASON).write_text(json.dumps({"reason": reason, "t": t}))

    def read_stop_reason(self) -> str | None:
        path = self.path / STOP_REASON
        return json.loads(path.read_text())["reason"] if path.exists() else None

    def write_watcher_pid(self, pid: int) -> None:
        (self.path / WATCHER_PID).write_text(str(pid))

    def read_watcher_pid(self) -> int:
        return int((self.path / WATCHER_PID).read_text())

    def write_watcher_error(self, text: str) -> None:
        (self.path / WATCHER_ERROR).write_text(text)

    def read_watcher_error(self) -> str | None:
        path = self.path / WATCHER_ERROR
        return path.read_text() if path.exists() else None
