"""DeepSpeed-Chat's RewardModel (critic and reward): a base transformer plus a scalar value head."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from rlhf_exp.checkpoints.files import VALUE_HEAD_FILE
from rlhf_exp.checkpoints.meta import value_head_width


class RewardModel(nn.Module):
    """As dschat/utils/model/reward_model.py: `rwtransformer` + `v_head` (the base model's output width -> 1,
    no bias; OPT's is word_embed_proj_dim). `num_padding_at_beginning` (OPT: 1) is kept as DeepSpeed-Chat keeps
    it: its step-2 pairwise loss skips those pads; the PPO scores read the last token and do not use it."""

    def __init__(self, base_model: nn.Module, num_padding_at_beginning: int = 0) -> None:
        super().__init__()
        self.config = base_model.config
        self.num_padding_at_beginning = num_padding_at_beginning
        self.rwtransformer = base_model
        self.v_head = nn.Linear(value_head_width(self.config), 1, bias=False)

    def forward_value(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.rwtransformer(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)[0]
        return self.v_head(hidden).squeeze(-1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.forward_value(input_ids, attention_mask)


def load_value_head(model: RewardModel, checkpoint: Path) -> bool:
    """Load v_head from the checkpoint's value_head.safetensors; False where it has none (fresh head)."""
    path = checkpoint / VALUE_HEAD_FILE
    if not path.is_file():
        return False
    weight = load_file(str(path))["v_head.weight"]
    with torch.no_grad():
        model.v_head.weight.copy_(weight.to(model.v_head.weight.dtype))
    return True
