"""DeepSpeed-Chat's PPO math (rlhf_exp/rank/ppo.py) on known inputs."""

from __future__ import annotations

import math

import pytest
import torch

from rlhf_exp.config.schema import PpoSettings
from rlhf_exp.rank.ppo import actor_loss_fn, advantages_and_returns, compute_rewards, critic_loss_fn

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
