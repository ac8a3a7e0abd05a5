"""The GPU allocation history's replay (memory/gpu_history.py) on a synthetic trace of torch's snapshot format."""

from __future__ import annotations

from rlhf_exp.config.units import GIB
from rlhf_exp.memory.gpu_history import HELD, replay

TORCH = {"filename": "/x/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"}


def _frame(path: str, line: int, name: str) -> dict:
    return {"filename": path, "line": line, "name": name}


def _alloc(addr: int, gib: float, site: dict) -> dict:
    return {"action": "alloc", "addr": addr, "size": int(gib * GIB), "frames": [TORCH, site]}


def _free(addr: int, gib: float) -> dict:
    return {"action": "free_requested", "addr": addr, "size": int(gib * GIB), "frames": []}


def test_the_peak_names_what_was_live_there_by_its_first_caller_outside_torch_and_counts_what_earlier_stages_held():
    bucket = _frame("/x/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", 3266, "setup_buckets")
    activation = _frame("/x/site-packages/transformers/models/llama/modeling_llama.py", 200, "forward")
    trace = [
        _alloc(1, 2.0, activation),
        _alloc(2, 1.0, activation),
        _free(99, 0.5),  # older than the stage: held less
        _alloc(3, 1.5, bucket),  # the peak: 10 - 0.5 + 2 + 1 + 1.5 = 14 GiB
        _free(1, 2.0),
        _alloc(4, 1.0, activation),  # 13: below the peak
    ]
    out = replay(trace, allocated_at_begin=10 * GIB)
    assert out["peak_allocated_gib"] == 14.0
    sites = dict(out["sites"])
    assert sites[HELD] == 9.5
    assert sites["transformers/models/llama/modeling_llama.py:200 forward"] == 3.0
    assert sites["deepspeed/runtime/zero/stage_1_and_2.py:3266 setup_buckets"] == 1.5
    assert sum(sites.values()) == out["peak_allocated_gib"]


def test_a_stage_that_only_frees_peaks_where_it_began():
    out = replay([_free(7, 1.0)], allocated_at_begin=3 * GIB)
    assert out["peak_allocated_gib"] == 3.0 and dict(out["sites"]) == {HELD: 3.0}
