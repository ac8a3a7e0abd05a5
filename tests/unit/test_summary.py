"""Stage records from synthetic events and samples (report/summary.py), and the columns they feed."""

from __future__ import annotations

import pytest
from synthetic import event, mem, sample, start, typed, typed_samples

from rlhf_exp.config.units import GIB
from rlhf_exp.report.record import COLUMN, stage_columns, summary_key
from rlhf_exp.report.summary import load_time_s, summarize_records
from rlhf_exp.report.table import COLUMNS
from rlhf_exp.report.tracking import SUMMARY_KEYS, summary_of


def two_rank_job() -> tuple[dict, list]:
    events = {
        r: [
            start(r),
            event(r, "dist_init", "begin", 1.0),
            event(r, "dist_init", "end", 2.0, duration_s=1.0),
            {**event(r, "actor.load", "begin", 3.0), **mem(1.0)},
            {**event(r, "actor.load", "end", 5.0 + r, duration_s=2.0 + r), **mem(1.5, vmhwm_gib=2.0 + r, pss_gib=1.4)},
        ]
        for r in (0, 1)
    }
    samples = [
        sample(0.5, 10.0),  # the baseline, before ranks
        sample(1.5, 11.0, {0: 1.0, 1: 1.0}),
        sample(3.2, 13.0, {0: 1.0, 1: 1.0}),
        sample(4.0, 14.5, {0: 1.8, 1: 2.5}),
        sample(5.5, 13.0, {0: 1.5, 1: 1.6}),
        sample(7.0, 12.0, {0: 1.5, 1: 1.5}),
    ]
    return events, samples


def test_a_stage_spans_first_begin_to_last_end_above_the_baseline() -> None:
    events, samples = two_rank_job()
    summary = summarize_records(typed(events), typed_samples(samples))
    assert [row["stage"] for row in summary["stages"]] == ["dist_init", "actor.load"]
    load = summary["stages"][1]
    assert load["status"] == "ok" and load["ranks_begun"] == load["ranks_done"] == 2
    assert load["window_s"] == 3.0 and load["samples"] == 3  # t = 3.2, 4.0 and 5.5 fall in [3, 6]
    assert load["node_peak_gib"] == 4.5 and load["node_rise_gib"] == 1.5  # above baseline; above the window's first sample
    assert load["rank_peak_rss_max_gib"] == 3.0  # rank 1's VmHWM: the kernel's figure, not a sample
    assert load["rank_pss_anon_peak_max_gib"] == 2.5  # sampled Pss_Anon beats the end figure
    assert load["duration_s"] == 3.0
    assert [r["peak_rss_gib"] for r in load["per_rank"]] == [2.0, 3.0]
    assert summary["node_peak_gib"] == 4.5 and summary["samples"] == 6
    assert summary["samples_per_s"] == 0.77  # 5 periods over 6.5 s
    assert "gpu_cuda_peak_allocated_gib" not in load and "cuda_allocated_gib" not in load["per_rank"][0]
    assert load_time_s(summary) == 3.0


def test_pss_anon_counts_in_the_stage_it_was_read_in_not_the_one_a_sample_carries_it_into() -> None:
    """The watcher reads Pss_Anon on its own thread (a GiB-scale walk takes tens of ms): a sample carries each rank's
    latest reading, which may be older than the sample and from the stage before."""
    events, samples = two_rank_job()
    read_at = {1: (1.5, 1.5), 2: (3.1, 3.2), 3: (3.9, 4.0), 4: (5.4, 4.0), 5: (6.9, 6.8)}  # rank 1's 2.5 read at 4.0
    for i, times in read_at.items():
        for r, at in enumerate(times):
            samples[i]["ranks"][str(r)]["pss_anon_t"] = at
    samples[4]["ranks"]["1"]["pss_anon"] = int(2.5 * GIB)  # carried on from t=4.0
    samples.insert(2, sample(2.9, 12.0, {0: 0.5, 1: 3.0}))  # read in dist_init's tail, carried into the load's window
    samples[2]["ranks"]["0"]["pss_anon_t"] = samples[2]["ranks"]["1"]["pss_anon_t"] = 1.9
    samples[2]["t"] = 3.05
    dist_init, load = summarize_records(typed(events), typed_samples(samples))["stages"]
    assert [r["pss_anon_peak_gib"] for r in dist_init["per_rank"]] == [1.0, 3.0]  # read at 1.9, inside [1, 2]
    assert [r["pss_anon_peak_gib"] for r in load["per_rank"]] == [1.8, 2.5]  # not dist_init's 3.0
    assert load["pss_anon_sum_peak_gib"] == 4.3  # t=4.0: both read inside; t=5.5 pairs readings 1.5 s apart, both in
    assert dist_init["pss_anon_sum_peak_gib"] == 3.5  # the sample at 3.05, its readings both at 1.9


def test_what_else_moved_on_the_node_is_named_from_the_watchers_meminfo_snapshots() -> None:
    """The node figure fell below the ranks' own memory in 13B runs: the fields that moved say what was freed."""
    events, samples = two_rank_job()
    snapshot = {"MemFree": 100.0, "Cached": 20.0, "Balloon": 3.0, "Dirty": 1.0}
    samples[0]["meminfo"] = {k: int(g * GIB) for k, g in snapshot.items()}  # the baseline
    samples[1]["meminfo"] = {k: int(g * GIB) for k, g in {**snapshot, "Balloon": 1.9, "MemFree": 99.0}.items()}
    samples[4]["meminfo"] = {k: int(g * GIB) for k, g in {**snapshot, "Balloon": 1.8, "Dirty": 1.01}.items()}
    summary = summarize_records(typed(events), typed_samples(samples))
    assert summary["baseline"]["meminfo_gib"] == snapshot
    dist_init, load = summary["stages"]
    assert dist_init["meminfo_moved_gib"] == {"MemFree": -1.0, "Balloon": -1.1}  # the snapshot at t=1.5, by its end
    assert load["meminfo_moved_gib"] == {"Balloon": -1.2}  # Dirty's 0.01 is under the 0.05 GiB shown
    assert "meminfo_moved_gib" not in summarize_records(*two_rank_job_typed())["stages"][0]  # no snapshots: absent


def test_the_node_peak_net_of_the_per_cpu_lists_leaves_their_draining_out() -> None:
    """A first run's baseline held 1 GiB of free pages on the per-CPU lists that drained during its load."""
    events, samples = two_rank_job()
    for s, lists in zip(samples, (1.0, 0.9, 0.6, 0.3, 0.2, 0.2), strict=True):
        s["percpu_free"] = int(lists * GIB)
    load = summarize_records(typed(events), typed_samples(samples))["stages"][1]
    assert load["node_peak_gib"] == 4.5  # 14.5 at t=4.0 above the 10.0 baseline, as MemTotal - MemAvailable says
    assert load["node_net_peak_gib"] == 5.2  # (14.5 - 0.3) - (10.0 - 1.0): what the lists' 0.7 GiB drain hid
    assert "node_net_peak_gib" not in summarize_records(*two_rank_job_typed())["stages"][1]  # earlier runs: absent


def two_rank_job_typed() -> tuple:
    events, samples = two_rank_job()
    return typed(events), typed_samples(samples)


def test_a_rank_that_died_in_a_stage_is_sized_from_the_watcher_and_the_stage_is_incomplete() -> None:
    events, samples = two_rank_job()
    events[1] = events[1][:-1]  # rank 1 never ended actor.load
    load = summarize_records(typed(events), typed_samples(samples))["stages"][1]
    assert load["status"] == "incomplete" and load["ranks_done"] == 1
    dead = load["per_rank"][1]
    assert dead["duration_s"] is None and dead["peak_rss_gib"] == 2.5  # largest RSS the watcher saw


def test_an_error_event_fails_the_stage() -> None:
    events, samples = two_rank_job()
    events[1][-1] = {**events[1][-1], "event": "error", "error": "RuntimeError: boom"}
    assert summarize_records(typed(events), typed_samples(samples))["stages"][1]["status"] == "failed"


def test_no_samples_gives_no_stages() -> None:
    events, _ = two_rank_job()
    assert summarize_records(typed(events), []) == {"stages": [], "baseline": {}}


def test_the_table_the_tracker_and_the_report_read_their_columns_from_the_record() -> None:
    assert [c.key for c in COLUMNS[1:]] == [c.key for c in stage_columns(table=True)]
    assert SUMMARY_KEYS == tuple(c.key for c in stage_columns(summary=True))
    assert COLUMN["node_peak_gib"].header == "node Δ GiB"
    events, samples = two_rank_job()
    result = {"status": "completed", **summarize_records(typed(events), typed_samples(samples))}
    summary = summary_of(result)
    assert summary[summary_key("actor.load", "node_peak_gib")] == 4.5
    assert summary["load_time_s"] == pytest.approx(3.0)
