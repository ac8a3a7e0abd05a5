"""The console while a job runs: each stage as it happens (name, elapsed time, node memory now), from the
ranks' events and the watcher's samples on disk. Live on a terminal (rich), one line per stage otherwise."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

from rlhf_exp.config.units import GIB
from rlhf_exp.jobdir import JobDir, JsonlTail
from rlhf_exp.records import Event, Sample, is_header


class StageProgress:
    def __init__(
        self,
        job_dir: JobDir,
        console: Console | None = None,
        poll_s: float = 0.5,
        quiet: bool = False,
        on_stage_end: Callable[[str], None] | None = None,
    ) -> None:
        """`on_stage_end(stage)`: called as rank 0 ends (or fails) each stage, from this class's thread."""
        self.job_dir, self.poll_s, self.quiet, self.on_stage_end = job_dir, poll_s, quiet, on_stage_end
        self.console = console or Console()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stage-progress", daemon=True)
        self._events = JsonlTail(job_dir.rank_events_file(0))
        self._new_samples = JsonlTail(job_dir.samples_file())
        self._open: dict[str, float] = {}  # stage -> begin time
        self._samples: list[tuple[float, int]] = []  # (t, node_used) of every sample read so far

    def __enter__(self) -> StageProgress:
        if not self.quiet:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.quiet:
            return
        self._done.set()
        self._thread.join()
        self._poll(None)  # the last stages, after the ranks stopped

    def _run(self) -> None:
        with self.console.status("starting ranks", spinner="dots") as status:
            while not self._done.wait(self.poll_s):
                self._poll(status)

    def _read_new_samples(self) -> None:
        samples = [Sample.from_json(data) for data in self._new_samples.new() if not is_header(data)]
        self._samples += [(sample.t, sample.node_used) for sample in samples]

    def _node_gib(self, at: float | None = None) -> float | None:
        """Node memory above the baseline at time `at` (the latest sample by then), or now."""
        before = [used for t, used in self._samples if at is None or t <= at]
        return (before[-1] - self._samples[0][1]) / GIB if len(before) > 1 else None

    @staticmethod
    def _text(node: float | None) -> str:
        return f"node {node:+.2f} GiB" if node is not None else ""

    def _stage_ended(self, stage: str) -> None:
        if self.on_stage_end is None:
            return
        try:
            self.on_stage_end(stage)
        except Exception:  # a tracker's hiccup never stops the job or prints a traceback: the job's log keeps it
            logging.getLogger(__name__).exception("on_stage_end(%s) failed", stage)

    def _poll(self, status: Any) -> None:
        events = [Event.from_json(data) for data in self._events.new()]
        self._read_new_samples()  # after the events: the samples up to the newest event's time are in
        for ev in events:
            if ev.event == "begin" and ev.stage:
                self._open[ev.stage] = ev.t
            elif ev.closes_stage and ev.stage in self._open:
                took = ev.t - self._open.pop(ev.stage)
                mark = "[green]✓[/green]" if ev.event == "end" else "[red]✗[/red]"
                self.console.print(f"  {mark} {ev.stage:18s} {took:7.1f} s   {self._text(self._node_gib(ev.t))}")
                self._stage_ended(ev.stage)
        if status is not None and self._open:
            stage, began = next(iter(self._open.items()))
            status.update(f"{stage}  {time.time() - began:.0f} s  {self._text(self._node_gib())}")
