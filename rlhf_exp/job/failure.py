"""Who failed first, in which stage, and why: every piece of failure attribution, in one place.

Inputs: what the elastic launcher saw of its ranks (exit codes, signals), the job guard's verdict
(watcher died, watchdog, job_timeout_s), and the ranks' own events (errors, barriers waited at).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlhf_exp.jobdir import Failure
from rlhf_exp.records import Event, Events


@dataclass
class RankFailure:
    """One rank as the launcher saw it fail."""

    rank: int
    exitcode: int
    signal: str | None
    message: str
    timestamp: float


@dataclass
class JobStop:
    """Why the job guard stopped a job: something outside the ranks."""

    reason: str
    process: str | None = None  # the process at fault (watcher, watchdog); None for the job's own limit
    signal: str | None = None  # how that process died


@dataclass
class LaunchOutcome:
    ok: bool
    failures: list[RankFailure] = field(default_factory=list)
    log_dir: Path | None = None
    stopped_by: str | None = None  # the signal that stopped the whole job (SIGTERM from a scheduler or the guard)
    guard_stop: JobStop | None = None  # why the job guard sent it


def root_cause(failures: list[RankFailure]) -> RankFailure | None:
    """The rank that failed first. Ranks the agent stopped itself (SIGTERM) are consequences, not causes."""
    own = [f for f in failures if f.signal != "SIGTERM"] or failures
    return min(own, key=lambda f: f.timestamp, default=None)


def failed_stage(events: Events, rank: int | None) -> str | None:
    """The stage a rank was in when it failed: its error event, else its last begun-but-unended stage."""
    candidates = [rank] if rank is not None and rank in events else sorted(events)
    for r in candidates:
        for ev in events[r]:
            if ev.event == "error":
                return ev.stage
    for r in candidates:
        open_stages = [ev.stage for ev in events[r] if ev.event == "begin"]
        closed = {ev.stage for ev in events[r] if ev.closes_stage}
        unfinished = [s for s in open_stages if s not in closed]
        if unfinished:
            return unfinished[-1]
    return None


def last_begun_stage(events: Events) -> str | None:
    """The stage any rank began last: where the job was when something outside the ranks stopped it between stages."""
    begun = [ev for evs in events.values() for ev in evs if ev.event == "begin"]
    return max(begun, key=lambda ev: ev.t).stage if begun else None


def first_error(events: Events) -> Event | None:
    errors = [ev for evs in events.values() for ev in evs if ev.event == "error"]
    return min(errors, key=lambda ev: ev.t) if errors else None


def stuck_rank(events: Events) -> int | None:
    """A rank still inside a stage (last record a `begin`) while some peer is not: the one the others waited for."""
    inside = [r for r, evs in events.items() if evs and evs[-1].event == "begin"]
    return min(inside) if inside and len(inside) < len(events) else None


def first_silent_rank(events: Events) -> int | None:
    """Without exit records (ranks killed from outside): the rank whose records stopped first died first.

    A dead rank writes nothing more, while its peers go on to the next barrier before being killed.
    """
    unfinished = [r for r, evs in events.items() if evs and evs[-1].event != "done"]
    return min(unfinished, key=lambda r: events[r][-1].t, default=None)


def attribute(outcome: LaunchOutcome, events: Events, verdict: str | None = None) -> dict[str, Any] | None:
    """The result's `failure`, or None when the job succeeded.

    In order: the guard stopping the job for a process outside the ranks; a rank's own error; a rank the
    launcher saw killed by a signal; a rank that stopped inside a stage while its peers failed waiting for
    it in a collective (hung, or died unseen); the launcher's exit record; a peer's waiting error; the rank
    whose records stopped first. `verdict`: what killed the job from outside (e.g. SLURM's), put before
    what the records say unless a rank recorded its own error.
    """
    if outcome.ok:
        return None
    failed = [f.__dict__ for f in outcome.failures]
    guard = outcome.guard_stop
    if guard and guard.process:  # not a rank's fault: name the process and the stage the ranks were in
        return Failure(
            # "launch": before any rank began a stage
            stage=failed_stage(events, None) or last_begun_stage(events) or "launch",
            rank=None,
            reason=f"job stopped: {guard.reason}",
            signal=guard.signal,
            process=guard.process,
            ranks_failed=failed,
        ).to_dict()
    # a rank that failed in a collective (a barrier, a timeout) reports its peer's trouble, not its own
    own = first_error({r: [ev for ev in evs if not (ev.waiting or ev.timeout)] for r, evs in events.items()})
    peer = first_error(events) if own is None else None
    cause = root_cause(outcome.failures)
    stuck = stuck_rank(events)
    hung: bool | None = None
    if own:
        rank, reason = own.rank, own.error or ""
    elif cause and cause.signal not in (None, "SIGTERM"):
        rank, reason = cause.rank, f"killed by {cause.signal}"
    elif peer and stuck is not None and stuck != peer.rank:
        rank, what = stuck, "timed out waiting for it" if peer.timeout else "lost it"
        reason = f"rank {stuck} stopped in {failed_stage(events, stuck)}; rank {peer.rank} {what}: {(peer.error or '')[:300]}"
        hung = peer.timeout
    elif cause:
        rank, reason = cause.rank, f"exit code {cause.exitcode}"
    elif peer:
        rank, reason = peer.rank, peer.error or ""
    else:
        rank = stuck if stuck is not None else first_silent_rank(events)
        reason = "no rank recorded an error"
    if outcome.stopped_by and not own:
        reason = f"job stopped: {guard.reason}" if guard else f"job stopped by {outcome.stopped_by}"
    if verdict and not own:
        reason = f"{verdict}; {reason}"
    launcher = next((f for f in outcome.failures if f.rank == rank), None)
    return Failure(
        stage=failed_stage(events, rank) or "launch",  # a rank that died in its imports, before dist_init began
        rank=rank,
        reason=reason,
        signal=launcher.signal if launcher else None,
        exitcode=launcher.exitcode if launcher else None,
        hung=hung,
        ranks_failed=failed,
    ).to_dict()
