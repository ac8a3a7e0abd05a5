"""Adam's states of a ZeRO-1/2 engine: how many bytes they hold, and DeepSpeed 0.9's timing of their allocation.

DeepSpeed 0.9 (the 2023 seed) ended `DeepSpeedZeroOptimizer.__init__` with `initialize_optimizer_states()`: a zero
fp32 gradient per partition and one optimizer step, so Adam's m and v (8 bytes per trainable parameter, over the
ranks) were held from `deepspeed.initialize` on. DeepSpeed 0.19.8 allocates them at the first step. With
`train.optimizer_states_at_init=true` the same allocation happens at initialize, as 0.9 did it (zero gradients, a
step), except that the step leaves no trace: its learning rate is 0 and the step counters are put back to 0, so
the first real step computes exactly what it would have (tests/e2e/test_ppo.py: weights bit-identical after it).
"""

from __future__ import annotations

from typing import Any

import torch


def inner_optimizer(engine: Any) -> torch.optim.Optimizer | None:
    """The torch optimizer over the fp32 partitions of a ZeRO-1/2 engine (None for other engines)."""
    zero = getattr(engine, "optimizer", None)
    inner = getattr(zero, "optimizer", None)
    return inner if isinstance(inner, torch.optim.Optimizer) and hasattr(zero, "single_partition_of_fp32_groups") else None


def state_bytes(engine: Any) -> int:
    """Bytes of the state tensors (Adam's m and v, its step counters) of the torch optimizer inside the engine's
    wrappers (ZeRO's, bf16's), on this rank."""
    optimizer = getattr(engine, "optimizer", None)
    while getattr(optimizer, "optimizer", None) is not None:
        optimizer = optimizer.optimizer
    if not isinstance(optimizer, torch.optim.Optimizer):
        return 0
    tensors = (t for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t))
    return sum(t.numel() * t.element_size() for t in tensors)


def allocate_at_init(engine: Any) -> None:
    """Allocate a ZeRO-1/2 engine's optimizer states now, as DeepSpeed 0.9's initialize did; no weight or counter
    changes. A no-op for engines without a ZeRO-1/2 optimizer."""
    optimizer = inner_optimizer(engine)
    if optimizer is None:
        return
    partitions = engine.optimizer.single_partition_of_fp32_groups
    for p in partitions:
        p.grad = torch.zeros_like(p)  # 0.9's single_grad_partition: held during the step only
    rates = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        group["lr"] = 0.0  # the states are made, the weights untouched (decay and update both scale with lr)
    optimizer.step()
    for group, lr in zip(optimizer.param_groups, rates, strict=True):
        group["lr"] = lr
    for state in optimizer.state.values():  # the first real step is step 1 again
        step = state.get("step")
        if torch.is_tensor(step):
            step.zero_()
        elif step is not None:
            state["step"] = 0
    for p in partitions:
        p.grad = None
