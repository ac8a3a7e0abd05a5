"""A job's two views over time, each built once for every reader (stage records, the timeline, W&B): the watcher's
samples as series, and each stage's window across ranks.

Stage windows line up across ranks (each stage opens with a barrier): a window runs from the first rank's begin to
the last rank's end or error; while a rank never closed it (killed inside it), to the last sample, since the stage
was still running on that rank until the job ended.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from rlhf_exp.config.units import GIB
from rlhf_exp.records import Event, Events, Sample


@dataclass(frozen=True)
class StageWindow:
    name: str
    begins: dict[int, Event]  # by rank
    closes: dict[int, Event]  # the end or error event, by rank
    start: float  # time.time() of the first begin
    stop: float  # of the last close, or the last sample while a rank never closed the stage

    @property
    def status(self) -> str:
        """failed (a rank raised in it) | ok (every rank ended it) | incomplete (a rank never closed it)."""
        if any(ev.event == "error" for ev in self.closes.values()):
            return "failed"
        return "ok" if len(self.closes) == len(self.begins) else "incomplete"

    def samples_in(self, samples: list[Sample]) -> list[Sample]:
        """The samples taken inside the window; for a stage shorter than the sampling period, the one after it."""
        inside = [s for s in samples if self.start <= s.t <= self.stop]
        return inside or [s for s in samples if s.t >= self.start][:1]

    def private_in(self, samples: list[Sample]) -> PrivateReadings:
        """The ranks' Pss_Anon readings taken inside the window, by each reading's own time (the watcher reads it on
        its own thread: a sample carries each rank's latest), and the Σ of the samples whose every reading was."""
        readings = PrivateReadings()
        for s in samples[bisect.bisect_left(samples, self.start, key=lambda x: x.t) :]:
            times = {r: figures.pss_anon_time(s.t) for r, figures in s.ranks.items()}
            if s.t > self.stop and (not times or min(times.values()) > self.stop):
                break  # a rank's readings only get newer
            read_inside = [r for r, at in times.items() if self.start <= at <= self.stop]
            for r in read_inside:
                readings.by_rank.setdefault(r, []).append(s.ranks[r].pss_anon)
            if times and len(read_inside) == len(times):
                readings.sums.append(s.ranks_pss_anon)
        return readings


@dataclass
class PrivateReadings:
    """A stage's Pss_Anon readings (bytes): each rank's, and the ranks' sums."""

    by_rank: dict[int, list[int]] = field(default_factory=dict)
    sums: list[int] = field(default_factory=list)


def stage_windows(events: Events, samples: list[Sample]) -> list[StageWindow]:
    """Every stage any rank began, in the order ranks began them."""
    names = list(dict.fromkeys(ev.stage for evs in events.values() for ev in evs if ev.event == "begin" and ev.stage))
    last_t = samples[-1].t if samples else None
    windows = []
    for name in names:
        begins = {r: ev for r, evs in events.items() for ev in evs if ev.stage == name and ev.event == "begin"}
        closes = {r: ev for r, evs in events.items() for ev in evs if ev.stage == name and ev.closes_stage}
        start = min(ev.t for ev in begins.values())
        closed_at = max((ev.t for ev in closes.values()), default=start)
        stop = closed_at if len(closes) == len(begins) or last_t is None else max(last_t, closed_at)
        windows.append(StageWindow(name, begins, closes, start, stop))
    return windows


@dataclass
class Series:
    """Samples as GiB against seconds since the first sample; the node above that first sample (the baseline taken
    before ranks started). A rank's value is None where a sample does not hold it (not started yet, or gone)."""

    t0: float = 0.0
    time_s: list[float] = field(default_factory=list)
    node_gib: list[float] = field(default_factory=list)
    cgroup_gib: list[float | None] = field(default_factory=list)
    rank_pss_anon_gib: dict[int, list[float | None]] = field(default_factory=dict)
    rank_rss_gib: dict[int, list[float | None]] = field(default_factory=dict)
    gpu_used_gib: dict[int, list[float]] = field(default_factory=dict)  # NVML, per GPU index

    def __len__(self) -> int:
        return len(self.time_s)


def sample_series(samples: list[Sample]) -> Series:
    series = Series()
    if not samples:
        return series
    series.t0, base = samples[0].t, samples[0].node_used
    ranks = sorted({r for s in samples for r in s.ranks})
    for s in samples:
        series.time_s.append(round(s.t - series.t0, 3))
        series.node_gib.append((s.node_used - base) / GIB)
        series.cgroup_gib.append(s.cgroup_usage / GIB if s.cgroup_usage is not None else None)
        for r in ranks:
            figures = s.ranks.get(r)
            series.rank_pss_anon_gib.setdefault(r, []).append(figures.pss_anon / GIB if figures else None)
            series.rank_rss_gib.setdefault(r, []).append(figures.rss / GIB if figures else None)
        for i, used in enumerate(s.gpu_used):
            series.gpu_used_gib.setdefault(i, []).append(used / GIB)
    return series
