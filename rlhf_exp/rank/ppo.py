"""PPO steps on the built engine, with DeepSpeed-Chat's math (dschat/rlhf/ppo_trainer.py), one measured stage per part.

Per step: `ppo<k>.generate` (greedy actor generation, as DS-Chat does for Llama), `ppo<k>.score`
(actor and ref log-probs, critic values, reward score), `ppo<k>.train_actor` (KL-penalized rewards,
GAE advantages, clipped policy loss, backward, step) and `ppo<k>.train_critic` (clipped value loss,
backward, step). Prompts are token ids drawn locally, unpadded and all `prompt_len` long; answers
are forced to exactly `answer_len` tokens (eos suppressed), so every attention mask is all ones.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from rlhf_exp.config.schema import PpoSettings
from rlhf_exp.config.stages import ppo_stage
from rlhf_exp.config.units import GIB
from rlhf_exp.rank import optimizer_states
from rlhf_exp.rank.recorder import StageRecorder

Experience = dict[str, torch.Tensor]
FIRST_ORDINARY_TOKEN = 3  # ids 0-2 are pad, bos and eos in the generated checkpoints


def gather_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    log_probs = F.log_softmax(logits.float(), dim=-1)
    return log_probs.gather(dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)


def make_prompts(vocab_size: int, batch: int, length: int, seed: int, device: torch.device) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(FIRST_ORDINARY_TOKEN, vocab_size, (batch, length), generator=gen).to(device)


def compute_rewards(
    ppo: PpoSettings,
    prompt_len: int,
    log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor,
    reward_score: torch.Tensor,
    action_mask: torch.Tensor,
) -> torch.Tensor:
    """KL penalty per token, plus the clipped reward score on each answer's last token."""
    rewards = -ppo.kl_ctl * (log_probs - ref_log_probs)
    start = prompt_len - 1
    ends = start + action_mask[:, start:].sum(1) + 1
    clipped = torch.clamp(reward_score, -ppo.clip_reward_value, ppo.clip_reward_value)
    for j in range(log_probs.shape[0]):
        rewards[j, start : int(ends[j])][-1] += clipped[j]
    return rewards


def advantages_and_returns(
    ppo: PpoSettings, values: torch.Tensor, rewards: torch.Tensor, start: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation from `start` (the last prompt token) on."""
    last_gae: torch.Tensor | float = 0.0
    reversed_advantages = []
    length = rewards.size(-1)
    for t in reversed(range(start, length)):
        next_values = values[:, t + 1] if t < length - 1 else 0.0
        delta = rewards[:, t] + ppo.gamma * next_values - values[:, t]
        last_gae = delta + ppo.gamma * ppo.lam * last_gae
        reversed_advantages.append(last_gae)
    advantages = torch.stack(reversed_advantages[::-1], dim=1)
    return advantages.detach(), advantages + values[:, start:]


def actor_loss_fn(
    ppo: PpoSettings, logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    ratio = torch.exp((logprobs - old_logprobs) * mask)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1.0 - ppo.cliprange, 1.0 + ppo.cliprange)
    return torch.sum(torch.max(loss1, loss2) * mask) / mask.sum()


def critic_loss_fn(
    ppo: PpoSettings, values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    clipped = torch.clamp(values, old_values - ppo.cliprange_value, old_values + ppo.cliprange_value)
    loss = torch.max((values - returns) ** 2, (clipped - returns) ** 2)
    return 0.5 * torch.sum(loss * mask) / mask.sum()


def _end_scores(values: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The reward model's score: its value at each sequence's last real token (DS-Chat's chosen_end_scores)."""
    last = attention_mask.sum(1) - 1
    return values[torch.arange(values.shape[0], device=values.device), last]


def generate(actor: Any, prompts: torch.Tensor, ppo: PpoSettings, synced_gpus: bool) -> torch.Tensor:
    with torch.no_grad():
        seq = actor.module.generate(
            prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=ppo.answer_len,
            min_new_tokens=ppo.answer_len,
            do_sample=False,
            pad_token_id=0,
            synced_gpus=synced_gpus,
        )
    return seq


def set_modes(engines: dict[str, Any], training: bool) -> None:
    """DeepSpeed-Chat's trainer: generation with every model in eval mode; scoring and training with the actor
    and critic in train mode (dropout on, as in DS-Chat's generate_experience), ref and reward always eval."""
    for role, engine in engines.items():
        engine.train(training and role in ("actor", "critic"))


def score(engines: dict[str, Any], seq: torch.Tensor) -> Experience:
    """generate_experience's forward passes: old log-probs, ref log-probs, reward score, old values."""
    mask = torch.ones_like(seq)
    with torch.no_grad():
        logits = engines["actor"](seq, attention_mask=mask, use_cache=False).logits
        ref_logits = engines["ref"](seq, attention_mask=mask, use_cache=False).logits
        reward = _end_scores(engines["reward"](seq, attention_mask=mask), mask).float()
        values = engines["critic"](seq, attention_mask=mask).float()[:, :-1]
    return {
        "logprobs": gather_log_probs(logits[:, :-1, :], seq[:, 1:]),
        "ref_logprobs": gather_log_probs(ref_logits[:, :-1, :], seq[:, 1:]),
        "reward": reward,
        "values": values,
        "mask": mask,
    }


def train_actor(actor: Any, ppo: PpoSettings, seq: torch.Tensor, exp: Experience, prompt_len: int) -> dict[str, float]:
    """Advantages from the experience, then the clipped policy loss; backward and step."""
    start = prompt_len - 1
    action_mask = exp["mask"][:, 1:]
    with torch.no_grad():
        rewards = compute_rewards(ppo, prompt_len, exp["logprobs"], exp["ref_logprobs"], exp["reward"], action_mask)
        advantages, returns = advantages_and_returns(ppo, exp["values"], rewards, start)
    exp["advantages"], exp["returns"] = advantages, returns
    logits = actor(seq, attention_mask=exp["mask"], use_cache=False).logits
    log_probs = gather_log_probs(logits[:, :-1, :], seq[:, 1:])
    loss = actor_loss_fn(ppo, log_probs[:, start:], exp["logprobs"][:, start:], advantages, action_mask[:, start:])
    actor.backward(loss)
    actor.step()
    kl = ((exp["logprobs"] - exp["ref_logprobs"]) * action_mask)[:, start:].sum(1).mean()
    return {"actor_loss": loss.item(), "reward_mean": exp["reward"].mean().item(), "kl": kl.item()}


def train_critic(critic: Any, ppo: PpoSettings, seq: torch.Tensor, exp: Experience, prompt_len: int) -> dict[str, float]:
    start = prompt_len - 1
    action_mask = exp["mask"][:, 1:]
    values = critic(seq, attention_mask=exp["mask"]).float()[:, :-1]
    loss = critic_loss_fn(ppo, values[:, start:], exp["values"][:, start:], exp["returns"], action_mask[:, start:])
    critic.backward(loss)
    critic.step()
    return {"critic_loss": loss.item()}


def run_ppo(engines: dict[str, Any], ppo: PpoSettings, batch: int, seed: int, recorder: StageRecorder) -> None:
    """`ppo.steps` PPO steps, each part a measured stage; every rank draws its own prompts."""
    actor = engines["actor"]
    # ZeRO-3 ranks must keep stepping forward together while any rank still generates
    synced_gpus = actor.zero_optimization_stage() == 3 and dist.is_initialized() and dist.get_world_size() > 1
    vocab = actor.module.config.vocab_size
    for step in range(1, ppo.steps + 1):
        step_seed = seed + 1000 * step + recorder.rank
        prompts = make_prompts(vocab, batch, ppo.prompt_len, step_seed, recorder.device)
        torch.manual_seed(step_seed)  # dropout (OPT trains with 0.1) draws the same masks whatever the loader drew before
        with recorder.stage(ppo_stage(step, "generate")) as info:
            set_modes(engines, training=False)
            seq = generate(actor, prompts, ppo, synced_gpus)
            info["tokens"] = int(seq.numel())
        set_modes(engines, training=True)
        with recorder.stage(ppo_stage(step, "score")):
            exp = score(engines, seq)
        with recorder.stage(ppo_stage(step, "train_actor")) as info:
            info.update(train_actor(actor, ppo, seq, exp, ppo.prompt_len))
            info["optimizer_state_gib"] = round(optimizer_states.state_bytes(actor) / GIB, 6)
        with recorder.stage(ppo_stage(step, "train_critic")) as info:
            info.update(train_critic(engines["critic"], ppo, seq, exp, ppo.prompt_len))
            info["optimizer_state_gib"] = round(optimizer_states.state_bytes(engines["critic"]) / GIB, 6)
