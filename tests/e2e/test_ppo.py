"""The four engines and a real PPO step on CPU ranks at ZeRO 0-3: every stage measured, losses finite, only
adapters and the value head trained (the formulas on known inputs: tests/unit/test_ppo_math.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import RunApp, node_allowance
from test_end_to_end import assert_complete_result

from rlhf_exp.config.schema import PpoSettings
from rlhf_exp.config.stages import PPO_PARTS

PPO = PpoSettings()


def changed(job_dir: Path, role: str) -> set[str]:
    before = json.loads((job_dir / "weights" / f"{role}.json").read_text())
    after = json.loads((job_dir / "weights" / f"{role}.after_ppo.json").read_text())
    assert before.keys() == after.keys()
    return {name for name in before if before[name] != after[name]}


def assert_ppo_step(result: dict, gpus: int) -> None:
    """A completed job's PPO step: measured stages, finite losses, only adapters and the value head trained."""
    rows = {row["stage"]: row for row in result["stages"]}
    for part in PPO_PARTS:
        row = rows[f"ppo1.{part}"]
        assert row["ranks_done"] == gpus and row["rank_peak_rss_max_gib"] > 0.05
        assert row["node_peak_gib"] > -node_allowance(result)  # measured; its baseline drifts (conftest)
    assert rows["ppo1.generate"]["tokens"] == PPO.prompt_len + PPO.answer_len  # micro batch 1
    for key, stage in (("actor_loss", "train_actor"), ("critic_loss", "train_critic"), ("kl", "train_actor")):
        assert math.isfinite(rows[f"ppo1.{stage}"][key])
    assert rows["ppo1.train_critic"]["critic_loss"] > 0
    job_dir = Path(result["job_dir"])
    actor, critic = changed(job_dir, "actor"), changed(job_dir, "critic")
    assert actor and all("lora_" in name for name in actor)  # frozen base weights stay as loaded
    assert critic and all("lora_" in name or name.startswith("v_head") for name in critic)
    assert not changed(job_dir, "ref") and not changed(job_dir, "reward")


# ZeRO-2 at gpus 1 and 2 runs in tests/e2e/test_sweep_tracking.py (assert_ppo_step on each job), ZeRO-1 at 2 below
@pytest.mark.parametrize(("zero", "gpus"), [("stage0", 1), ("stage3", 2)])
def test_engine_and_a_ppo_step_train_only_the_adapters_and_value_head(run_app: RunApp, zero: str, gpus: int) -> None:
    proc, result = run_app(f"zero={zero}", f"gpus={gpus}", "verify_weights=true", "ppo.steps=1", "wandb.mode=disabled")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result is not None
    assert_complete_result(result, gpus, int(zero.removeprefix("stage")))  # every stage measured, figures plausible
    assert "ppo1.train_actor" in proc.stdout and "node Δ: the node" in proc.stdout  # the printed table, its legend
    assert_ppo_step(result, gpus)


def test_deepspeed_09s_timing_allocates_adam_states_at_init_and_changes_nothing_else(tmp_path: Path, ckpt_cache: Path) -> None:
    """train.optimizer_states_at_init at ZeRO-1, 2 ranks: each train role's Adam states exist from its init on (the
    torch optimizer's own tensors, as the plan says), and the weights after the PPO step are bit-identical."""
    from conftest import run_sweep_in

    overrides = ("train.optimizer_states_at_init=false,true", "zero=stage1", "gpus=2", "verify_weights=true")
    overrides += ("wandb.mode=disabled",)
    proc, (off, on) = run_sweep_in(tmp_path / "sweep", ckpt_cache, *overrides)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert off["config"]["train"]["optimizer_states_at_init"] is False and on["config"]["train"]["optimizer_states_at_init"]
    for result, early in ((off, False), (on, True)):
        assert_complete_result(result, 2, 1)
        assert_ppo_step(result, 2)
        rows = {row["stage"]: row for row in result["stages"]}
        planned = {st["stage"]: st for st in result["plan"]["stages"]}
        for stage in ("actor.init", "critic.init", "ppo1.train_actor", "ppo1.train_critic"):
            measured = rows[stage]["optimizer_state_gib"]
            assert (measured > 0) == (early or stage.startswith("ppo1")), (early, stage, measured)
            # m and v planned; the measure also holds Adam's step counters (a few bytes)
            assert measured == pytest.approx(planned[stage]["optimizer_state_gib"], rel=0.02, abs=2e-6), (early, stage)
        assert rows["ref.init"]["optimizer_state_gib"] == rows["reward.init"]["optimizer_state_gib"] == 0
    for name in ("actor", "critic", "ref", "reward"):
        for when in ("", ".after_ppo"):
            weights = f"weights/{name}{when}.json"
            assert (Path(on["job_dir"]) / weights).read_text() == (Path(off["job_dir"]) / weights).read_text(), weights
