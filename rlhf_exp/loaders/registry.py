"""Every loading strategy, declared once: name, function and what it needs.

A leaf of data (it imports nothing of rlhf_exp), so validation, `loader=auto`, the planner and `--help` read it
without importing a model library or the planner. A loader's plan cost is the function of the same name in
rlhf_exp/plan/load_costs.py. The Hydra group conf/loader/ holds one yaml per declaration (tests/unit checks they agree).
Adding a loader: one module in rlhf_exp/loaders/, one LoaderSpec here, one yaml, one plan cost.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

AUTO = "auto"  # loader=auto: the planner picks the fastest loader (measured_speed.json) whose plan fits
MEASURED_SPEED = Path(__file__).with_name("measured_speed.json")  # written by python -m bench run time-to-engine --ship


@dataclass(frozen=True)
class LoaderSpec:
    name: str
    summary: str  # one line: what it does (shown by --help)
    function: str  # "module:attribute" of the Loader, imported only in a rank (it needs torch)
    partitioned: bool = False  # partitions while loading: needs ZeRO-3 for every role, and init keeps the partition
    fp32_model: bool = False  # leaves an fp32 host model that deepspeed.initialize casts to the engine dtype
    takes_turns: bool = False  # a node's ranks load in groups of loader.group_size, one group at a time
    copies_twin: bool = False  # ref/reward copy actor's/critic's weights on the GPU (loaders/twin.py, loader.copy_twin)

    def load_function(self) -> Callable:  # a rlhf_exp.loaders.base.Loader
        module, attr = self.function.split(":")
        return getattr(importlib.import_module(module), attr)


LOADERS: dict[str, LoaderSpec] = {
    spec.name: spec
    for spec in (
        LoaderSpec(
            "naive",
            "DeepSpeed-Chat 2023: fp32 model, full private read, load_state_dict, every rank at once",
            "rlhf_exp.loaders.naive:load_naive",
            fp32_model=True,
        ),
        LoaderSpec(
            "staggered",
            "naive, but a node's ranks take turns in groups of loader.group_size",
            "rlhf_exp.loaders.staggered:load_staggered",
            takes_turns=True,
        ),
        LoaderSpec(
            "low_mem",
            "from_pretrained in the engine dtype: meta-device model, memory-mapped safetensors",
            "rlhf_exp.loaders.low_mem:load_low_mem",
        ),
        LoaderSpec(
            "rank0_broadcast",
            "each node's local rank 0 reads; the others receive every tensor by broadcast",
            "rlhf_exp.loaders.rank0_broadcast:load_rank0_broadcast",
            copies_twin=True,
        ),
        LoaderSpec(
            "zero3_init",
            "partitioned load under deepspeed.zero.Init (ZeRO-3 only): each rank reads its share of every tensor "
            "(fast_read=false: from_pretrained, which gathers and broadcasts every module)",
            "rlhf_exp.loaders.zero3_init:load_zero3_init",
            partitioned=True,
        ),
        LoaderSpec(
            "direct",
            "straight onto the rank's device: parallel pinned reads on a GPU (from_pretrained with device_map: fast_read=false)",
            "rlhf_exp.loaders.direct:load_direct",
            copies_twin=True,
        ),
    )
}
LOADER_CHOICES = (*LOADERS, AUTO)  # what loader.name accepts


def measured_seconds_per_gib() -> dict[str, float]:
    """Engine build time per GiB of checkpoint, per loader, as the bench measured it (shipped with the package)."""
    try:
        return json.loads(MEASURED_SPEED.read_text())["seconds_per_gib"]
    except (OSError, ValueError, KeyError):
        return {}


def auto_order() -> list[LoaderSpec]:
    """Every loader, fastest measured first; loaders the bench did not time go last, in declaration order."""
    speed = measured_seconds_per_gib()
    return sorted(LOADERS.values(), key=lambda spec: speed.get(spec.name, float("inf")))


def get_spec(name: str) -> LoaderSpec:
    if name not in LOADERS:
        raise KeyError(f"loader: unknown {name!r}; valid: {', '.join(LOADERS)}")
    return LOADERS[name]
