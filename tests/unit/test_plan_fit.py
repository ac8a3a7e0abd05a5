"""loader=auto, the fit check and the target machine, on plans sized from presets (no checkpoint, no process, no GPU)."""

from __future__ import annotations

import pytest
from conftest import compose_settings

from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.units import GIB
from rlhf_exp.plan.advice import alternatives
from rlhf_exp.plan.fit import GPU_WITH_ERROR, all_plans, choose, first_misfit, gpu_fit_need, usable_loaders
from rlhf_exp.plan.inputs import role_shapes
from rlhf_exp.plan.machine import declared_target, local_target
from rlhf_exp.plan.terms import RankBase

BASE = RankBase(rss=0.5 * GIB, private=0.3 * GIB)  # a rank before any model, as plan.inputs.probe_rank_base measures it


def plans_on(*overrides: str):
    settings = compose_settings(*overrides)
    target = declared_target(settings)
    return settings, all_plans(settings, role_shapes(settings, {}), target, BASE), target


def test_auto_picks_the_fastest_loader_that_fits_and_the_fit_check_names_it() -> None:
    job = ("model=llama-7b", "gpus=8", "loader=auto", "machine=h200-141g-8x")
    settings, plans, roomy = plans_on(*job)
    node = {name: plan.node_peak_gib() for name, plan in plans.items()}
    assert node["naive"] > 8 * 4 * 6.7 > node["staggered"] > node["direct"]  # 8 fp32 copies of a 6.7B actor
    assert choose(settings, plans, roomy) == usable_loaders(settings)[0]  # the fastest measured (measured_speed.json)
    host = (node["staggered"] + node["direct"]) / 2 / settings.plan.host_fraction
    settings, plans, tight = plans_on(*job, f"machine.host_gib={host}")
    fitting = [name for name, plan in plans.items() if first_misfit(plan, tight) is None]
    assert "naive" not in fitting and "staggered" not in fitting and "direct" in fitting
    naive = settings.model_copy(update={"loader": settings.loader.model_copy(update={"name": "naive"})})
    with pytest.raises(
        ConfigError, match=r"^plan: loader=naive needs .* at actor\.load, .*machine=h200-141g-8x; loaders that fit: .*direct"
    ):
        choose(naive, plans, tight)
    settings, plans, small_gpu = plans_on(*job, "machine.gpu_gib=8")  # 13 GiB of bf16 weights per rank do not fit
    with pytest.raises(ConfigError, match="GiB of GPU memory at actor.load"):
        choose(settings, plans, small_gpu)


def test_issue_529_node_naive_fails_at_actor_load_and_the_advice_names_what_fits() -> None:
    """DeepSpeedExamples 529: 13B actor, 7B critic, LoRA r128, ZeRO-2 on 8 A100-80G with 500 GiB of host memory."""
    job = ("model=llama-13b", "lora=r128", "zero=stage2", "gpus=8", "loader=naive", "machine=a100-80g-8x", "machine.host_gib=500")
    settings, plans, target = plans_on(*job)
    assert target.gpu_bytes == 79.15 * GIB and target.ranks_per_node == 8 and not target.read_here
    stage, memory, need, have = first_misfit(plans["naive"], target)
    assert (stage, memory) == ("actor.load", "host") and need > have == 450
    advice = alternatives(settings, role_shapes(settings, {}), target, BASE)
    fits = [a for a in advice if a.loader]
    assert fits and all(a.gpu_need_gib * GIB <= target.gpu_bytes and a.node_peak_gib <= have for a in fits)
    assert any(a.overrides.startswith("zero=stage3") for a in fits)


def test_at_several_ranks_the_advice_offers_zero3_with_deepspeeds_memory_efficient_linear() -> None:
    """13B/7B at 8 ranks sharing one H200 under ZeRO-3: DeepSpeed-Chat's memory_efficient_linear=false holds the
    gathered linear weights for the backward (8 x 37 GiB at train_actor); with it on the step fits the card."""
    settings = compose_settings("model=llama-13b", "lora=r128", "zero=stage3", "gpus=8", "loader=zero3_init", "share_gpus=true")
    target = local_target(settings, "cuda", 125 * GIB, 120 * GIB, 139.8 * GIB, 1)  # the H200 this project is lent
    assert target.ranks_per_gpu == 8
    plans = all_plans(settings, role_shapes(settings, {}), target, BASE)
    stage, memory, _, _ = first_misfit(plans["zero3_init"], target)
    assert (stage, memory) == ("ppo1.train_actor", "GPU")
    advice = {a.overrides.split(" loader=")[0]: a for a in alternatives(settings, role_shapes(settings, {}), target, BASE)}
    lean = advice["train.memory_efficient_linear=true"]
    assert lean.loader is not None and lean.gpu_need_gib * 8 <= target.gpu_bytes / GIB


def test_a_card_that_holds_the_plan_but_not_its_error_is_refused_at_the_stage_the_error_fills() -> None:
    """The fit check allows for the planner's error on torch's peak (GPU_PLAN_ERROR): a stage over the card on its own
    figure is named as "GPU"; where none is, the first stage over the card with the error is, as GPU_WITH_ERROR."""
    job = ("model=llama-13b", "lora=r128", "zero=stage2", "gpus=8", "loader=direct", "machine=a100-80g-8x")
    _, plans, target = plans_on(*job, "machine.host_gib=500")
    plan = plans["direct"]
    peak = max(plan.stages, key=lambda st: st.gpu_need_gib)
    between = (peak.gpu_need_gib + gpu_fit_need(peak)) / 2  # holds the plan's figure, not the error above it
    _, plans, roomy = plans_on(*job, "machine.host_gib=500", f"machine.gpu_gib={between}")
    stage, memory, need, have = first_misfit(plans["direct"], roomy)
    assert memory == GPU_WITH_ERROR == "GPU +4%" and need == pytest.approx(gpu_fit_need(next(
        st for st in plans["direct"].stages if st.stage == stage)), abs=1e-9) and need > have  # fmt: skip
    assert all(st.gpu_need_gib <= have for st in plans["direct"].stages)
    _, plans, tight = plans_on(*job, "machine.host_gib=500", f"machine.gpu_gib={peak.gpu_need_gib - 0.01}")
    assert first_misfit(plans["direct"], tight)[:2] == (peak.stage, "GPU")  # over on its own figure: no error needed


def test_one_a100_names_the_first_stage_whose_gpu_memory_does_not_fit_ppo_included() -> None:
    settings, plans, target = plans_on("model=llama-13b", "lora=r128", "gpus=1", "loader=direct", "machine=a100-80g-8x")
    stage, memory, need, have = first_misfit(plans["direct"], target)
    assert memory == "GPU" and need > have == 79.15
    stages = [st.stage for st in plans["direct"].stages]
    assert stages.index(stage) == min(i for i, st in enumerate(plans["direct"].stages) if st.gpu_need_gib > 79.15)
    assert "ppo1.train_actor" in stages and "ppo1.generate" in stages


@pytest.mark.parametrize("at_init", ["true", "false"])
def test_the_seed_on_one_a100_runs_out_of_gpu_at_reward_init_with_either_adam_timing(at_init: str) -> None:
    """What the emulated A100 run measured on the H200 (bench/results/seed-a100-2026-12-05): torch's peak at
    reward.init 77.91 GiB today, 79.41 and asking for more with 0.9's timing; a card of 79.15 GiB less the context
    holds neither. A figure with the allocator's cache (gpu_device_gib) would name critic.init for 0.9's timing."""
    job = ("model=llama-13b", "lora=r128", "gpus=1", "loader=naive", "machine=a100-80g-8x")
    settings, plans, target = plans_on(*job, f"train.optimizer_states_at_init={at_init}")
    stage, memory, need, have = first_misfit(plans["naive"], target)
    assert (stage, memory, have) == ("reward.init", "GPU", 79.15)
    allocated = {st.stage: st.gpu_rank_gib for st in plans["naive"].stages}["reward.init"]
    if at_init == "true":  # the run died asking for more than the 79.41 it held
        assert allocated > 79.41
    else:
        assert allocated == pytest.approx(77.91, rel=0.01)


def test_gpus_above_one_node_span_nodes_and_host_figures_are_per_node() -> None:
    one = plans_on("model=llama-7b", "gpus=8", "loader=naive", "machine=h100-80g-8x")
    two = plans_on("model=llama-7b", "gpus=16", "loader=naive", "machine=h100-80g-8x")
    assert (one[2].nodes, two[2].nodes, two[2].ranks_per_node) == (1, 2, 8)
    load = [next(st for st in p["naive"].stages if st.stage == "actor.load") for _, p, _ in (one, two)]
    assert load[0].node_peak_gib == load[1].node_peak_gib  # 8 ranks per node either way
    spread = plans_on("model=llama-7b", "gpus=16", "loader=naive", "machine=h100-80g-8x", "machine.nodes=4")
    assert spread[2].ranks_per_node == 4 and spread[1]["naive"].node_peak_gib() < one[1]["naive"].node_peak_gib() / 1.9
    with pytest.raises(ConfigError, match="^machine.nodes: 12 ranks per node but 8 GPUs per node; valid: at least 2"):
        declared_target(compose_settings("gpus=12", "machine=h100-80g-8x", "machine.nodes=1"))
    with pytest.raises(ConfigError, match="^machine.nodes: 12 ranks do not split evenly over 5 nodes"):
        declared_target(compose_settings("gpus=12", "machine=h100-80g-8x", "machine.nodes=5"))


def test_the_console_verdict_shows_the_gpu_figure_the_fit_check_compares() -> None:
    """What a card needs (allocations and the CUDA context) times the ranks sharing each GPU."""
    from rlhf_exp.job.prepare import plan_verdict

    stage = {"stage": "ppo1.train_actor", "rank_peak_gib": 3.0, "rank_rise_gib": 2.0, "node_peak_gib": 1.0}
    stage |= {"gpu_device_gib": 16.7, "gpu_need_gib": 15.35, "gpu_rank_gib": 13.6}
    plan = {"loader": "direct", "stages": [stage], "capacity_host_gib": 111.7, "capacity_gpu_gib": 140.4, "fits": True}
    shared = plan_verdict({**plan, "machine": {"ranks_per_gpu": 2}, "first_misfit": None})
    expected = "plan: loader=direct, node peak 1.00 GiB of 111.7 GiB usable, GPU 30.70 GiB of 140.4 GiB per GPU (2 ranks)"
    assert shared == expected + ": fits"
    misfit = {"stage": "ppo1.train_actor", "memory": "GPU", "need_gib": 141.2, "capacity_gib": 140.4}
    alone = plan_verdict({**plan, "machine": {"ranks_per_gpu": 1}, "fits": False, "first_misfit": misfit})
    verdict = "does not fit at ppo1.train_actor (GPU: 141.20 of 140.40 GiB) (plan.fit_check=false)"
    assert alone.endswith(f"GPU 15.35 GiB of 140.4 GiB per GPU: {verdict}")


def test_deepspeed_09s_timing_moves_zero2_adam_states_from_the_first_step_to_init() -> None:
    """train.optimizer_states_at_init: Adam's m and v (8 bytes per trainable parameter over the ranks) held from each
    train role's init, with 0.9's zero fp32 gradient (4 bytes) beside them during it; the PPO step's peak unchanged."""
    from rlhf_exp.plan.ppo_costs import adam_states

    seed = ("model=llama-13b", "lora=r128", "gpus=2", "loader=naive", "machine=a100-80g-8x")
    for zero, early in (("stage2", True), ("stage1", True), ("stage3", False), ("stage0", False)):
        settings, off, _ = plans_on(*seed, f"zero={zero}")
        _, on, _ = plans_on(*seed, f"zero={zero}", "train.optimizer_states_at_init=true")
        shapes = role_shapes(settings, {})
        before = {st.stage: st for st in off["naive"].stages}
        after = {st.stage: st for st in on["naive"].stages}
        states = {role: adam_states(shapes[role], int(zero[-1]), 2) / GIB if early else 0.0 for role in ("actor", "critic")}
        assert after["actor.init"].optimizer_state_gib == pytest.approx(states["actor"], abs=1e-4)
        assert before["actor.init"].optimizer_state_gib == 0.0
        rise = {name: after[name].gpu_rank_gib - before[name].gpu_rank_gib for name in before}
        assert rise["actor.init"] == pytest.approx(1.5 * states["actor"], abs=1e-3), zero  # m, v and the zero gradient
        assert rise["ref.init"] == pytest.approx(states["actor"], abs=1e-3), zero  # held from then on
        assert rise["reward.init"] == pytest.approx(states["actor"] + states["critic"], abs=1e-3), zero
        # the actor's step holds its own either way, and now the critic's too; from the critic's step on, the same
        assert rise["ppo1.train_actor"] == pytest.approx(states["critic"], abs=1e-3), zero
        assert rise["ppo1.train_critic"] == pytest.approx(0.0, abs=1e-3), zero
        for part in ("ppo1.train_actor", "ppo1.train_critic"):
            assert after[part].optimizer_state_gib == before[part].optimizer_state_gib > 0
