"""Synthetic rank events and watcher samples, shaped as rlhf_exp/rank/recorder.py and memory/watcher.py write them."""

from __future__ import annotations

from typing import Any

from rlhf_exp.config.units import GIB
from rlhf_exp.records import Event, Events, Sample


def mem(rss_gib: float, vmhwm_gib: float | None = None, pss_gib: float | None = None) -> dict[str, int]:
    return {
        "rss": int(rss_gib * GIB),
        "vmhwm": int((vmhwm_gib if vmhwm_gib is not None else rss_gib) * GIB),
        "pss_anon": int((pss_gib if pss_gib is not None else rss_gib) * GIB),
        "uss": int(rss_gib * GIB),
        "rss_file": 0,
        "rchar": 0,
    }


def event(rank: int, stage: str, kind: str, t: float, **extra: Any) -> dict[str, Any]:
    return {"rank": rank, "pid": 1000 + rank, "t": t, "stage": stage, "event": kind, **mem(1.0), **extra}


def start(rank: int, t: float = 0.0) -> dict[str, Any]:
    return {"rank": rank, "pid": 1000 + rank, "t": t, "event": "start", "host": "h"}


def sample(t: float, node_gib: float, ranks: dict[int, float] | None = None) -> dict[str, Any]:
    return {
        "t": t,
        "node_used": int(node_gib * GIB),
        "ranks": {
            str(r): {"pid": 1000 + r, "rss": int(g * GIB), "rss_file": 0, "pss_anon": int(g * GIB)}
            for r, g in (ranks or {}).items()
        },
    }


def typed(events: dict[int, list[dict[str, Any]]]) -> Events:
    """Events as JobDir.read_events gives them: each line read through records.Event."""
    return {r: [Event.from_json(ev) for ev in evs] for r, evs in events.items()}


def typed_samples(samples: list[dict[str, Any]]) -> list[Sample]:
    return [Sample.from_json(s) for s in samples]
