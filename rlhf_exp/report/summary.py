"""Turn a job's rank events and watcher samples into its per-stage records (report/record.py).

A stage's node-wide figures are the watcher samples inside its window (report/series.py); node and cgroup
figures are reported above the baseline taken before ranks started.
"""

from __future__ import annotations

from typing import Any

from rlhf_exp.config.stages import is_load_stage
from rlhf_exp.config.units import gib
from rlhf_exp.jobdir import JobDir
from rlhf_exp.records import Event, Events, Sample
from rlhf_exp.report.record import MEMINFO_MOVED_GIB, RANK_GPU_FIGURES, STAGE_FACTS, RankRecord, StageRecord
from rlhf_exp.report.series import StageWindow, stage_windows


def load_time_s(result: dict[str, Any]) -> float:
    """Seconds spent in the `.load` stages of a result: what the loaders cost in time."""
    return sum(s["duration_s"] or 0 for s in result.get("stages", []) if is_load_stage(s["stage"]))


def _max(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def rank_record(begin: Event, close: Event | None, samples: list[Sample], private: list[int]) -> RankRecord:
    """One rank's figures for a stage; `close` is the end or error event (None: the rank died in it); `private`: its
    Pss_Anon readings taken in the stage (series.StageWindow.private_in)."""
    mine = [s.ranks[begin.rank] for s in samples if begin.rank in s.ranks]
    first, last = begin.memory, (close or begin).memory
    assert first is not None and last is not None  # begin, end and error events carry the rank's memory
    rss_file_peak = max([r.rss_file for r in mine] + [last.rss_file])
    record = RankRecord(
        rank=begin.rank,
        pid=begin.pid,
        duration_s=close.duration_s if close else None,
        # a rank that died in the stage wrote no VmHWM: the largest RSS the watcher saw stands in
        peak_rss_gib=gib(last.vmhwm) if close else gib(_max([r.rss for r in mine])),
        rss_begin_gib=gib(first.rss),
        pss_anon_end_gib=gib(last.pss_anon),
        pss_anon_peak_gib=gib(_max([*private, last.pss_anon])),
        uss_end_gib=gib(last.uss),
        rss_file_rise_gib=gib(rss_file_peak - first.rss_file),
        rss_file_peak_gib=gib(rss_file_peak),
        rss_shmem_end_gib=gib(last.rss_shmem),
        read_gib=gib(last.rchar - first.rchar),
        heap_free_end_gib=gib(last.heap_free) if last.heap_free is not None else None,
    )
    for key in RANK_GPU_FIGURES:
        if getattr(last, key) is not None:
            setattr(record, f"{key}_gib", gib(getattr(last, key)))
    record.cuda_pinned_blocks = last.cuda_pinned_blocks
    return record


def _rank_dict(record: RankRecord) -> dict[str, Any]:
    """A rank's row as stored: GPU figures only where a GPU was used."""
    return {k: v for k, v in vars(record).items() if v is not None or not k.startswith(("cuda_", "nvml_"))}


def meminfo_moved(baseline: Sample, snapshots: list[Sample], until: float) -> dict[str, float] | None:
    """The /proc/meminfo fields (and per-CPU free lists: kernel.meminfo_snapshot) that moved by MEMINFO_MOVED_GIB or
    more from the baseline to the last of the samples carrying a snapshot (`snapshots`, in time order) taken by `until`
    (GiB, signed); None where the watcher took none (samples of earlier runs)."""
    taken = [s.meminfo for s in snapshots if s.t <= until and s.meminfo is not None]
    if baseline.meminfo is None or not taken:
        return None
    last = taken[-1]
    moved = {k: gib(v - baseline.meminfo[k]) for k, v in last.items() if k in baseline.meminfo}
    return {k: d for k, d in moved.items() if abs(d) >= MEMINFO_MOVED_GIB}


def meminfo_snapshots(samples: list[Sample]) -> list[Sample]:
    """The samples carrying a /proc/meminfo snapshot (the watcher takes one about once a second)."""
    return [s for s in samples if s.meminfo is not None]


def summarize_stage(window: StageWindow, samples: list[Sample], baseline: Sample, snapshots: list[Sample]) -> StageRecord:
    """`snapshots`: meminfo_snapshots(samples), gathered once for every stage."""
    inside, private = window.samples_in(samples), window.private_in(samples)
    ranks = [
        rank_record(window.begins[r], window.closes.get(r), inside, private.by_rank.get(r, [])) for r in sorted(window.begins)
    ]
    node_peak = _max([s.node_used for s in inside])
    net_peak = _max([s.node_used_net for s in inside])
    cgroup_peak = _max([s.cgroup_usage for s in inside])
    gpu_used = [max(s.gpu_used) for s in inside if s.gpu_used]
    ends = [ev for _, ev in sorted(window.closes.items()) if ev.event == "end"]
    facts = ends[0].facts if ends else {}
    return StageRecord(
        stage=window.name,
        status=window.status,
        ranks_begun=len(window.begins),
        ranks_done=len(ends),
        duration_s=_max([r.duration_s for r in ranks]),
        window_s=round(window.stop - window.start, 4),
        samples=len(inside),
        node_peak_gib=gib(node_peak - baseline.node_used) if node_peak is not None else None,
        node_net_peak_gib=gib(net_peak - baseline.node_used_net) if None not in (net_peak, baseline.node_used_net) else None,
        node_rise_gib=gib(node_peak - inside[0].node_used) if node_peak is not None else None,
        cgroup_peak_gib=(
            gib(cgroup_peak - baseline.cgroup_usage) if cgroup_peak is not None and baseline.cgroup_usage is not None else None
        ),
        rank_peak_rss_max_gib=_max([r.peak_rss_gib for r in ranks]),
        rank_pss_anon_peak_max_gib=_max([r.pss_anon_peak_gib for r in ranks]),
        pss_anon_sum_peak_gib=gib(_max([*private.sums, sum(ev.memory.pss_anon for ev in window.closes.values() if ev.memory)])),
        rank_uss_end_max_gib=_max([r.uss_end_gib for r in ranks]),
        rank_rss_file_peak_max_gib=_max([r.rss_file_peak_gib for r in ranks]),
        rank_heap_free_end_max_gib=_max([r.heap_free_end_gib for r in ranks]),
        gpu_cuda_peak_allocated_gib=_max([r.cuda_peak_allocated_gib for r in ranks]),
        gpu_cuda_reserved_gib=_max([r.cuda_reserved_gib for r in ranks]),
        gpu_nvml_used_gib=_max([r.nvml_used_gib for r in ranks]),
        gpu_nvml_peak_gib=gib(max(gpu_used)) if gpu_used else None,
        meminfo_moved_gib=meminfo_moved(baseline, snapshots, window.stop),
        **{k: facts[k] for k in STAGE_FACTS if k in facts},
        per_rank=[_rank_dict(r) for r in ranks],
    )


def summarize(job_dir: JobDir) -> dict[str, Any]:
    """Per-stage rows plus whole-job peaks, from what is on disk (works for killed jobs too)."""
    return summarize_records(job_dir.read_events(), job_dir.read_samples())


def summarize_records(events: Events, samples: list[Sample]) -> dict[str, Any]:
    """The result's `stages`, `baseline`, `node_peak_gib`, `samples` and `samples_per_s` (the watcher's achieved rate
    over the run) from events and samples."""
    if not samples:
        return {"stages": [], "baseline": {}}
    baseline = samples[0]
    snapshots = meminfo_snapshots(samples)
    stages = [summarize_stage(w, samples, baseline, snapshots).to_dict() for w in stage_windows(events, samples)]
    return {
        "stages": stages,
        "baseline": {
            "node_used_gib": gib(baseline.node_used),
            "cgroup_usage_gib": gib(baseline.cgroup_usage),
            "meminfo_gib": {k: gib(v) for k, v in baseline.meminfo.items()} if baseline.meminfo else None,
        },
        "node_peak_gib": gib(max(s.node_used for s in samples) - baseline.node_used),
        "samples": len(samples),
        "samples_per_s": round((len(samples) - 1) / span, 2) if (span := samples[-1].t - samples[0].t) > 0 else None,
    }
