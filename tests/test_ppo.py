"""One PPO step with DeepSpeed-Chat's math: the formulas on known inputs, then the four engines and a real step
on CPU ranks at ZeRO 0-3: every stage measured, losses finite, only adapters and the value head trained."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import RunApp
from test_end_to_end import assert_complete_result

from rlhf_exp.ppo import actor_loss_fn, advantages_and_returns, compute_rewards, critic_loss_fn
from rlhf_exp.settings import PpoSettings
from rlhf_exp.stages import PPO_PARTS

PPO = PpoSettings()


def test_rewards_are_kl_penalty_plus_clipped_score_on_the_last_answer_token() -> None:
    log_probs = torch.tensor([[0.0, -1.0, -2.0, -3.0]])
    ref = torch.tensor([[0.0, -1.5, -2.0, -2.0]])
    rewards = compute_rewards(PPO, 2, log_probs, ref, torch.tensor([9.0]), torch.ones(1, 4))
    kl = -0.1 * (log_probs - ref)
    assert torch.allclose(rewards[0, :3], kl[0, :3])
    assert rewards[0, 3].item() == pytest.approx(kl[0, 3].item() + 5.0)  # score 9 clipped to clip_reward_value 5


def test_gae_with_gamma_and_lambda_one_is_return_to_go_minus_value() -> None:
    ppo = PpoSettings(gamma=1.0, lam=1.0)
    values = torch.tensor([[0.5, 0.25, 1.0, 2.0]])
    rewards = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    advantages, returns = advantages_and_returns(ppo, values, rewards, start=1)
    to_go = torch.tensor([[6.0, 5.0, 3.0]])  # rewards[1:] summed from each t to the end
    assert torch.allclose(advantages, to_go - values[:, 1:])
    assert torch.allclose(returns, to_go)


def test_policy_loss_is_clipped_and_value_loss_too() -> None:
    mask = torch.ones(1, 1)
    old = torch.zeros(1, 1)
    new = torch.full((1, 1), math.log(2.0), requires_grad=True)  # ratio 2, beyond 1 + cliprange
    loss = actor_loss_fn(PPO, new, old, torch.ones(1, 1), mask)
    assert loss.item() == pytest.approx(-1.2)  # clipped ratio 1.2 times advantage 1
    loss.backward()
    assert new.grad is not None and new.grad.abs().item() == 0  # clipped: no gradient pushes further
    values = torch.tensor([[1.0]])
    # unclipped error 1, clipped value 0.2 has error 0.2: the larger (pessimistic) one counts
    assert critic_loss_fn(PPO, values, torch.zeros(1, 1), torch.zeros(1, 1), mask).item() == pytest.approx(0.5)


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
        assert row["ranks_done"] == gpus and row["rank_peak_rss_max_gib"] > 0.05 and row["node_peak_gib"] > 0
    assert rows["ppo1.generate"]["tokens"] == PPO.prompt_len + PPO.answer_len  # micro batch 1
    for key, stage in (("actor_loss", "train_actor"), ("critic_loss", "train_critic"), ("kl", "train_actor")):
        assert math.isfinite(rows[f"ppo1.{stage}"][key])
    assert rows["ppo1.train_critic"]["critic_loss"] > 0
    job_dir = Path(result["job_dir"])
    actor, critic = changed(job_dir, "actor"), changed(job_dir, "critic")
    assert actor and all("lora_" in name for name in actor)  # frozen base weights stay as loaded
    assert critic and all("lora_" in name or name.startswith("v_head") for name in critic)
    assert not changed(job_dir, "ref") and not changed(job_dir, "reward")


# ZeRO-2 at gpus 1 and 2 runs in tests/test_sweep_tracking.py (assert_ppo_step on each job)
@pytest.mark.parametrize(("zero", "gpus"), [("stage0", 1), ("stage1", 2), ("stage3", 2)])
def test_engine_and_a_ppo_step_train_only_the_adapters_and_value_head(run_app: RunApp, zero: str, gpus: int) -> None:
    proc, result = run_app(f"zero={zero}", f"gpus={gpus}", "verify_weights=true", "ppo.steps=1", "wandb.mode=disabled")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result is not None
    assert_complete_result(result, gpus, int(zero.removeprefix("stage")))  # every stage measured, figures plausible
    assert "ppo1.train_actor" in proc.stdout and "node Δ GiB" in proc.stdout  # the printed table
    assert_ppo_step(result, gpus)
