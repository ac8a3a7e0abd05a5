"""The seed report's mechanism on CPU: under `naive`, host memory grows with the number of ranks."""

from __future__ import annotations

import pytest
from conftest import RunApp


def actor_load(run_app: RunApp, gpus: int) -> tuple[dict, float]:
    proc, result = run_app("model=medium", f"gpus={gpus}", "loader=naive", "zero=stage2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = next(r for r in result["stages"] if r["stage"] == "actor.load")
    return row, result["checkpoint_gib"]["actor"]


@pytest.mark.slow
def test_naive_host_memory_grows_with_ranks(run_app: RunApp) -> None:
    one, ckpt = actor_load(run_app, 1)
    two, _ = actor_load(run_app, 2)
    assert ckpt > 0.15  # a ~200 MB checkpoint: big enough to see above the ranks' own footprint
    # each rank builds fp32 (2x an fp16 checkpoint) and reads a private copy: >= 2x checkpoint per rank
    assert two["node_peak_gib"] - one["node_peak_gib"] >= 2 * ckpt
    assert two["pss_anon_sum_peak_gib"] >= 1.7 * one["pss_anon_sum_peak_gib"]
    for rank in two["per_rank"]:
        assert rank["peak_rss_gib"] - one["per_rank"][0]["peak_rss_gib"] > -0.1  # every rank pays the same
        assert rank["pss_anon_peak_gib"] >= 3 * ckpt
