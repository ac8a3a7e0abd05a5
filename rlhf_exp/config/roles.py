"""The four models of DeepSpeed-Chat's RLHF engine, and which checkpoint each is built from."""

from __future__ import annotations

from typing import Literal

ROLES = ("actor", "ref", "critic", "reward")  # DeepSpeed-Chat's build order
TRAIN_ROLES = ("actor", "critic")  # LoRA and an optimizer; ref and reward are frozen
CheckpointKind = Literal["causal_lm", "value"]
# ref is built from the actor's checkpoint, reward from the critic's; value models get DeepSpeed-Chat's v_head
ROLE_CHECKPOINT = {"actor": "actor", "ref": "actor", "critic": "critic", "reward": "critic"}
ROLE_KIND: dict[str, CheckpointKind] = {"actor": "causal_lm", "ref": "causal_lm", "critic": "value", "reward": "value"}
CHECKPOINT_KIND: dict[str, CheckpointKind] = {"actor": "causal_lm", "critic": "value"}  # the two checkpoints a job reads
