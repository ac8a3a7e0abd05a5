"""Failure attribution (job/failure.py) on synthetic events and launcher records: who failed first, where, why."""

from __future__ import annotations

from synthetic import event, start, typed

from rlhf_exp.job.failure import JobStop, LaunchOutcome, RankFailure, attribute, failed_stage, first_silent_rank, stuck_rank


def ranks_in(stage: str, n: int = 2) -> dict[int, list[dict]]:
    return {
        r: [start(r), event(r, "dist_init", "begin", 1.0), event(r, "dist_init", "end", 2.0), event(r, stage, "begin", 3.0)]
        for r in range(n)
    }


def test_success_has_no_failure() -> None:
    assert attribute(LaunchOutcome(ok=True), typed(ranks_in("actor.load"))) is None


def test_a_ranks_own_error_wins_over_the_launchers_records() -> None:
    events = ranks_in("ref.init")
    events[1].append(event(1, "ref.init", "error", 4.0, error="RuntimeError: injected"))
    failures = [RankFailure(0, -15, "SIGTERM", "", 5.0), RankFailure(1, 1, None, "", 4.5)]
    failure = attribute(LaunchOutcome(ok=False, failures=failures), typed(events), verdict="SLURM job 7 FAILED")
    assert (failure["rank"], failure["stage"], failure["reason"]) == (1, "ref.init", "RuntimeError: injected")
    assert failure["exitcode"] == 1 and "SLURM" not in failure["reason"]  # its own error: no outside verdict


def test_a_killed_rank_is_named_with_its_signal_and_stage() -> None:
    failures = [RankFailure(0, -15, "SIGTERM", "", 6.0), RankFailure(1, -9, "SIGKILL", "", 5.0)]
    failure = attribute(LaunchOutcome(ok=False, failures=failures), typed(ranks_in("critic.load")))
    assert failure["rank"] == 1 and failure["signal"] == "SIGKILL" and failure["reason"] == "killed by SIGKILL"
    assert failure["stage"] == "critic.load"


def test_a_hung_rank_is_blamed_not_the_peer_that_timed_out_waiting() -> None:
    events = ranks_in("actor.load")
    events[0].append(event(0, "actor.load", "end", 4.0))
    events[0].append(event(0, "actor.init", "error", 30.0, error="DistBackendError: Timed out", waiting=True, timeout=True))
    failure = attribute(LaunchOutcome(ok=False, failures=[RankFailure(0, 1, None, "", 31.0)]), typed(events))
    assert failure["rank"] == 1 and failure["stage"] == "actor.load" and failure["hung"] is True
    assert failure["reason"].startswith("rank 1 stopped in actor.load; rank 0 timed out waiting for it")
    assert stuck_rank(typed(events)) == 1


def test_the_guard_names_the_process_outside_the_ranks() -> None:
    outcome = LaunchOutcome(ok=False, stopped_by="SIGTERM", guard_stop=JobStop("watchdog: node memory 90%", process="watchdog"))
    failure = attribute(outcome, typed(ranks_in("ref.load")))
    assert failure["process"] == "watchdog" and failure["rank"] is None and failure["stage"] == "ref.load"
    assert failure["reason"] == "job stopped: watchdog: node memory 90%"


def test_a_guard_stop_between_stages_names_the_stage_begun_last_not_launch() -> None:
    events = ranks_in("actor.load")
    for r in events:  # every rank has ended its stages: the watcher died just before the job exited
        events[r] += [event(r, "actor.load", "end", 4.0), event(r, "actor.init", "begin", 5.0 + r)]
        events[r] += [event(r, "actor.init", "end", 6.0 + r), {**start(r, 7.0 + r), "event": "done"}]
    outcome = LaunchOutcome(ok=False, stopped_by="SIGTERM", guard_stop=JobStop("watcher died", process="watcher"))
    assert failed_stage(typed(events), None) is None
    assert attribute(outcome, typed(events))["stage"] == "actor.init"
    assert attribute(outcome, typed({0: [start(0)]}))["stage"] == "launch"  # no rank began a stage


def test_a_job_timeout_or_a_scheduler_signal_says_so() -> None:
    timeout = LaunchOutcome(ok=False, stopped_by="SIGTERM", guard_stop=JobStop("job_timeout_s=30 exceeded"))
    assert attribute(timeout, typed(ranks_in("actor.load")))["reason"] == "job stopped: job_timeout_s=30 exceeded"
    assert (
        attribute(LaunchOutcome(ok=False, stopped_by="SIGTERM"), typed(ranks_in("actor.load")))["reason"]
        == "job stopped by SIGTERM"
    )


def test_without_exit_records_the_rank_whose_records_stopped_first_died_first() -> None:
    events = ranks_in("actor.init")
    events[0].append(event(0, "actor.init", "end", 9.0))
    events[1][-1]["t"] = 2.5
    events[0][-1]["t"] = 9.0
    assert first_silent_rank(typed(events)) == 1
    failure = attribute(LaunchOutcome(ok=False), typed(events), verdict="SLURM job 3 NODE_FAIL")
    assert failure["rank"] == 1 and failure["reason"].startswith("SLURM job 3 NODE_FAIL; ")
    assert failed_stage(typed(events), 1) == "actor.init"
