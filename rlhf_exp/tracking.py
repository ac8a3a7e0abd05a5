"""Experiment trackers behind one small Protocol; the job (not the ranks) owns the tracker."""

from __future__ import annotations

from typing import Any, Protocol


class Tracker(Protocol):
    def start(self, config: dict[str, Any], meta: dict[str, Any]) -> None: ...

    def finish(self, result: dict[str, Any], samples: list[dict[str, Any]]) -> None: ...


class NullTracker:
    """Tracks nothing (wandb.mode=disabled)."""

    def start(self, config: dict[str, Any], meta: dict[str, Any]) -> None:
        pass

    def finish(self, result: dict[str, Any], samples: list[dict[str, Any]]) -> None:
        pass


def make_tracker(mode: str) -> Tracker:
    return NullTracker()
