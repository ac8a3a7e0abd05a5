"""The fit-check bench's caps below the need (bench/tools/fit_check.py): a resource is capped 5 % under its measured
need only where that line falls clear of its noise at every stage up to the first one over it."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO))

from bench.tools.fit_check import BELOW, NOISE_GIB, caps_below, measured_need  # noqa: E402

STAGES = ("actor.load", "ref.load", "reward.init", "ppo1.generate", "ppo1.score", "ppo1.train_actor", "ppo1.train_critic")


def result(node: list[float], gpu: list[float]) -> dict:
    """A GPU job's result.json, as far as the caps read it: one rank, node and torch figures per stage."""
    stages = [
        {"stage": name, "node_peak_gib": n, "cuda_context_gib": 0.5, "per_rank": [{"cuda_peak_allocated_gib": g}]}
        for name, n, g in zip(STAGES, node, gpu, strict=True)
    ]
    return {"device": "cuda", "config": {"plan": {"host_fraction": 1.0}}, "stages": stages}


def test_a_gpu_jobs_flat_node_figure_is_left_uncapped_and_its_gpu_peak_capped() -> None:
    """The seed's direct job: ~2.4 GiB of node in every PPO stage (which crosses 5 % below first is chance), a GPU
    peak at train_actor well apart from every earlier stage."""
    job = result([1.2, 1.3, 1.4, 2.2, 2.24, 2.41, 2.42], [25.0, 50.0, 80.0, 82.0, 83.0, 113.0, 105.0])
    need = measured_need(job)
    assert need["gpu_gib"] == 113.0 + 1.75  # the plan's CUDA context, larger than the one measured
    caps = caps_below(job, dry=False)
    assert caps == {"gpu_gib": BELOW * need["gpu_gib"]}
    assert set(caps_below(job, dry=True)) == {"host_gib", "gpu_gib"}  # a dry run caps every one: the plumbing


def test_naives_load_peak_is_capped_where_its_first_stage_over_the_line_is_over_by_more_than_the_noise() -> None:
    node = [75.0, 76.0, 27.0, 2.2, 2.2, 2.4, 2.4]
    job = result(node, [0.0, 25.0, 75.0, 76.0, 76.0, 110.0, 100.0])
    cap = BELOW * 76.0
    assert node[0] - cap > NOISE_GIB["host_gib"]  # actor.load crosses first, clearly
    assert caps_below(job, dry=False)["host_gib"] == cap
    close = result([72.3, 76.0, 27.0, 2.2, 2.2, 2.4, 2.4], [0.0, 25.0, 75.0, 76.0, 76.0, 110.0, 100.0])
    assert "host_gib" not in caps_below(close, dry=False)  # actor.load within the noise of the line: left uncapped


def test_a_need_of_zero_or_less_gets_no_cap_even_in_a_dry_run() -> None:
    """A tiny CPU job whose node figure never rose above its baseline (a neighbour freed more meanwhile): a cap 5 %
    below it would not be positive, and the app refuses one (machine.host_gib must be greater than 0)."""
    job = result([-0.2, -0.1, -0.05, -0.3, -0.3, -0.3, -0.3], [1.0, 2.0, 3.0, 3.0, 3.0, 4.0, 4.0])
    assert measured_need(job)["host_gib"] == -0.05
    assert set(caps_below(job, dry=True)) == {"gpu_gib"}
