"""Every loading strategy gives the engines the very same weights, and CPU runs show what each one changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_plan_holds, run_sweep_in

from rlhf_exp.loaders.registry import LOADERS

pytestmark = pytest.mark.usefixtures("memory_stress")  # every claim here holds beside a 1 GiB neighbour

ALL = ",".join(LOADERS)
NO_WANDB = "wandb.mode=disabled"  # W&B is tested in test_sweep_tracking; here it would only cost seconds per job


def weight_digests(result: dict) -> dict[str, dict[str, str]]:
    job_dir = Path(result["job_dir"])
    return {f.stem: json.loads(f.read_text()) for f in sorted((job_dir / "weights").glob("*.json"))}


def assert_same_weights_as_naive(results: list[dict]) -> None:
    by_loader = {r["loader"]: r for r in results}
    for r in results:
        assert r["status"] == "completed", (r["loader"], r["failure"])
    reference = weight_digests(by_loader["naive"]) if "naive" in by_loader else weight_digests(results[0])
    # each engine after deepspeed.initialize, and again after the PPO step when there was one
    ppo = ("", ".after_ppo") if results[0]["config"]["ppo"]["steps"] else ("",)
    assert set(reference) == {f"{role}{when}" for role in ("actor", "ref", "critic", "reward") for when in ppo}
    for r in results:
        digests = weight_digests(r)
        for role, expected in reference.items():
            assert digests[role] == expected, (r["loader"], role)


def test_every_loader_gives_bit_identical_engine_weights(tmp_path: Path, ckpt_cache: Path) -> None:
    overrides = (f"loader={ALL}", "gpus=2", "zero=stage3", "verify_weights=true", NO_WANDB)
    proc, results = run_sweep_in(tmp_path / "sweep", ckpt_cache, *overrides)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["loader"] for r in results] == list(LOADERS)
    assert_same_weights_as_naive(results)
    for result in results:  # the planner, every loader at ZeRO-3
        assert_plan_holds(result)


@pytest.mark.slow
def test_loaders_at_four_ranks_without_lora(tmp_path: Path, ckpt_cache: Path) -> None:
    proc, results = run_sweep_in(
        tmp_path / "sweep",
        ckpt_cache,
        "loader=rank0_broadcast,zero3_init",  # node groups and partitions at 4 ranks; naive vs both: 2 ranks, above
        "gpus=4",
        "zero=stage3",
        "lora=disabled",
        "verify_weights=true",
        "ppo.steps=0",  # weights after a PPO step are compared at 2 ranks above
        NO_WANDB,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same_weights_as_naive(results)
    for result in results:
        assert_plan_holds(result)


@pytest.fixture(scope="module")
def medium_runs(tmp_path_factory: pytest.TempPathFactory, ckpt_cache: Path) -> dict[tuple[str, int], dict]:
    """A ~200 MB bf16 checkpoint (engine dtype too, so memory-mapped weights need no copy): 4 loaders at 2 ranks,
    naive at 1. Only the actor is built: its load is what these tests read."""
    base = tmp_path_factory.mktemp("medium")
    common = ("model=medium", "model.checkpoint_dtype=bf16", "zero=stage2", "roles=[actor]", "ppo.steps=0", NO_WANDB)
    runs = {}
    for name, overrides in {
        "two": ("loader=naive,staggered,low_mem,rank0_broadcast", "gpus=2"),
        "one": ("loader=naive", "gpus=1"),
    }.items():
        proc, results = run_sweep_in(base / name, ckpt_cache, *common, *overrides)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.update({(r["loader"], r["gpus"]): r for r in results})
    return runs


@pytest.mark.slow
def test_plan_matches_the_medium_checkpoint_runs(medium_runs: dict) -> None:
    """The planner where the model, not the process, dominates: 4 loaders at 2 ranks and naive at 1, ZeRO-2."""
    for result in medium_runs.values():
        assert_plan_holds(result)


def actor_load(result: dict) -> dict:
    return next(row for row in result["stages"] if row["stage"] == "actor.load")


@pytest.mark.slow
def test_naive_host_memory_grows_with_ranks(medium_runs: dict) -> None:
    one, two = actor_load(medium_runs["naive", 1]), actor_load(medium_runs["naive", 2])
    ckpt = medium_runs["naive", 1]["checkpoint_gib"]["actor"]
    assert ckpt > 0.15  # big enough to see above the ranks' own footprint
    # each rank builds fp32 (2x a 16-bit checkpoint) and reads a private copy: >= 2x checkpoint more per rank, on the
    # ranks' own private memory summed at each sample (the node-wide figure also holds the machine's neighbours)
    assert two["pss_anon_sum_peak_gib"] - one["pss_anon_sum_peak_gib"] >= 2 * ckpt
    # every rank pays what a lone rank pays (VmHWM: the kernel's exact per-process peak; the ranks'
    # peaks need not coincide, so their instantaneous sum is not the test)
    assert all(rank["peak_rss_gib"] >= 0.9 * one["per_rank"][0]["peak_rss_gib"] for rank in two["per_rank"])
    assert all(rank["pss_anon_peak_gib"] >= 3 * ckpt for rank in two["per_rank"])


def private_base(result: dict) -> float:
    """The ranks' private memory summed once dist_init is done (before any model)."""
    return sum(r["pss_anon_end_gib"] for r in next(s for s in result["stages"] if s["stage"] == "dist_init")["per_rank"])


@pytest.mark.slow
def test_cpu_shows_reads_shared_copies_and_transient_peaks(medium_runs: dict) -> None:
    ckpt = medium_runs["naive", 2]["checkpoint_gib"]["actor"]
    naive = actor_load(medium_runs["naive", 2])
    low_mem, bcast = actor_load(medium_runs["low_mem", 2]), actor_load(medium_runs["rank0_broadcast", 2])
    # naive: every rank reads the whole checkpoint into private memory
    assert all(r["read_gib"] >= 0.95 * ckpt for r in naive["per_rank"])
    # staggered: never more than one rank's transient at a time (plus earlier ranks' converted copies), on the ranks'
    # own figures (blind to whatever else the machine runs): their private memory summed at each watcher sample,
    # above what they held after dist_init. A lone rank's transient is the kernel's exact figure: VmHWM minus RSS
    # at the stage's start.
    transient = max(r["peak_rss_gib"] - r["rss_begin_gib"] for r in naive["per_rank"])
    rise = {name: actor_load(medium_runs[name, 2])["pss_anon_sum_peak_gib"] - private_base(medium_runs[name, 2])
            for name in ("naive", "staggered", "low_mem")}  # fmt: skip
    assert rise["staggered"] <= transient + 1.5 * ckpt < 2 * transient and rise["staggered"] < rise["naive"]
    # low_mem: weights stay in one shared, memory-mapped copy; no rank reads or copies them privately
    assert rise["low_mem"] < 0.25 * ckpt
    assert all(
        r["read_gib"] < 0.05 * ckpt and r["pss_anon_peak_gib"] < naive["per_rank"][0]["pss_anon_peak_gib"] / 3
        for r in low_mem["per_rank"]
    )
    # rank0_broadcast: only rank 0 maps the checkpoint; rank 1 gets the weights over the wire (into its own memory)
    rank0, rank1 = bcast["per_rank"]
    assert rank0["rss_file_rise_gib"] >= 0.5 * ckpt and rank1["rss_file_rise_gib"] < 0.1 * ckpt
    assert rank1["pss_anon_end_gib"] - rank0["pss_anon_end_gib"] >= 0.8 * ckpt
