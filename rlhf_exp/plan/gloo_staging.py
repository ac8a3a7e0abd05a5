"""Pinned host memory of GPU ranks that share a GPU and so talk through gloo: deepspeed.initialize's broadcast of a
replicated (ZeRO-0/1/2) model and the PPO step's collectives (ZeRO-3's gathers, every trained role's gradient reduce,
ZeRO-1/2's gather of the updated weights) staged through torch's pinned host pool, per rank.

gloo moves CUDA tensors through page-locked host copies: an all-gather pins its input and each of its N output chunks
apart (N+1 blocks of one partition's bytes), a reduce-scatter its input whole. torch's CachingHostAllocator rounds each
block to a power of two and keeps every block it made, by size class, for the rest of the process: the pool is the
sum over classes of the most blocks a class held at once, and it only grows. Per rank, N ranks, e engine bytes,
B = stage3_prefetch_bucket_size, for each ZeRO-3 role from the stage its weights are first gathered in:
  (N+1) x [ c x pow2(m e / N)           the largest decoder module, m = h i + r (h + i) with its LoRA adapters; c in
                                        flight at once: ceil(B / m) of them, at most 3, while m < B, else 2
          + pow2(B e / N)               the smaller modules that one prefetch gathers as one
          + pow2(m e / N) ]             the classes below (a halving series: at most the one above)
  and in its own class, if larger than those, (N+1) x pow2(V h e / N): the embedding or the LM head, one at a time
and each trained role's gradients, in its training step: pow2(min(T, R) e), R = reduce_bucket_size; a ZeRO-1/2 role
also gathers its updated weights after the step: (N+1) x pow2(T e / N).
Classes that roles share are counted once, at the most blocks any role needs in them.
deepspeed.initialize at N > 1 broadcasts a replicated model's every parameter from rank 0, one at a time: one block of
each parameter size's class (the embedding and LM head, the MLP's and attention's weights, the LoRA factors, the
norms). A fast_read load (direct on a GPU) hands the cached blocks back (fast_read.release_pinned_cache): the pool
starts again from nothing there.
Evidence: llama-1.3b pair at 8 ranks on the H100 (bench/results/plan-vs-measured-2026-12-06): 0.407, 0.416, 0.666
and 0.858 GiB at generate, score, train_actor and train_critic (this: 0.35, 0.35, 0.60, 0.73); the same job's gathers
logged on CPU ranks (each partition and when it was waited for) replay to 0.37 GiB through the allocator's rules.
ZeRO-2, the same pair at 4 ranks (bench/results/plan-vs-measured-2026-12-06-3): the actor's init pinned 0.167 GiB
(128 + 32 + 8 + 2 + 0.5 MiB and the norms' blocks: 0.1665 by this rule), the critic's after the critic's direct load
had emptied the pool 0.0735 (64 + 8 + 2 + 1 + 0.25 MiB: 0.0735); train_actor's step added 0.500 GiB in 7 blocks (256
MiB for its 229 MiB of gradients, four 64 MiB blocks beside the one the critic's init had left), train_critic's 0.281
GiB in 6 (128 MiB + 5 x 32 MiB): 0.583 and 0.865 GiB in all, 0.573 and 0.855 by these rules.
Ranks of their own GPU (NCCL) pin nothing of this.
"""

from __future__ import annotations

import math

from rlhf_exp.config.deepspeed import REDUCE_BUCKET
from rlhf_exp.config.deepspeed import STAGE3_BUCKET as PREFETCH_BUCKET
from rlhf_exp.plan.terms import RoleShape

# modules gathered one by one at once, at most: llama-1.3b's MLP modules (12.2M params with LoRA) were 3 in flight,
# the critic's 3.4M ones were coalesced into prefetch buckets instead (the gathers logged on CPU ranks)
MODULES_IN_FLIGHT = 3
GATHERED_FROM = {"actor": "generate", "ref": "score", "critic": "score", "reward": "score"}  # first forward pass


def pow2(nbytes: float) -> int:
    """torch's pinned block for a request: the next power of two."""
    return 1 << max(0, math.ceil(math.log2(max(nbytes, 1.0))))


def gather_classes(shape: RoleShape, lora_r: int, n: int, e: int) -> dict[int, int]:
    """Pinned block size -> blocks, for one ZeRO-3 role's gathers at n ranks."""
    module = shape.hidden * shape.intermediate + lora_r * (shape.hidden + shape.intermediate)
    if not module:  # a shape without its widths: nothing to size the gathers by
        return {}
    in_flight = min(math.ceil(PREFETCH_BUCKET / module), MODULES_IN_FLIGHT) if module < PREFETCH_BUCKET else 2
    per_gather = n + 1  # the input and N output chunks
    classes: dict[int, int] = {}
    # the module being computed, those prefetched and a bucket of smaller ones are gathered at once
    for nbytes, blocks in ((module * e / n, in_flight), (PREFETCH_BUCKET * e / n, 1)):
        size = pow2(nbytes)
        classes[size] = classes.get(size, 0) + blocks * per_gather
    below = pow2(module * e / n) // 2  # the smaller classes' blocks: as many bytes as one module gather's
    classes[below] = classes.get(below, 0) + 2 * per_gather
    embedding = pow2(shape.vocab * shape.hidden * e / n)  # gathered alone, before or after the decoder's modules
    classes[embedding] = max(classes.get(embedding, 0), per_gather)
    return classes


Pool = dict[int, int]  # pinned block size -> blocks the pool holds of it


def pool_bytes(pool: Pool) -> float:
    return float(sum(size * blocks for size, blocks in pool.items()))


def merged(pool: Pool, needed: Pool) -> Pool:
    """The pool after requests of `needed`'s blocks at once: a free block of its class serves a request, so the most
    blocks a class needed at once counts."""
    return {size: max(pool.get(size, 0), needed.get(size, 0)) for size in pool.keys() | needed.keys()}


def broadcast_classes(shape: RoleShape, lora_r: int, e: int) -> Pool:
    """deepspeed.initialize's broadcast of a replicated model, one parameter at a time: a block of each size class."""
    h, i, kv, r = shape.hidden, shape.intermediate, shape.kv_width or shape.hidden, lora_r
    sizes = [shape.vocab * h, h * h, kv * h, h * i, h]  # embedding and head, attention, MLP, norms (and a value head)
    sizes += [r * h, r * kv, r * i] if r else []  # LoRA's factors
    return {pow2(size * e): 1 for size in sizes if size}


def staging_pool(
    parts: list[str],
    shapes: dict[str, RoleShape],
    zero: dict[str, int],
    trained: dict[str, str],
    lora_r: dict[str, int],
    n: int,
    e: int,
    start: Pool | None = None,
) -> dict[str, float]:
    """The pool's bytes at the end of each PPO part (it never shrinks), from the engine's (`start`). `zero`: each role's
    ZeRO stage; `trained`: part -> the role it trains; `lora_r`: each role's adapter rank (0: none)."""
    classes: Pool = dict(start or {})
    pool: dict[str, float] = {}

    def need(size: int, blocks: int) -> None:  # a free block of its class serves a request: the most at once counts
        classes[size] = max(classes.get(size, 0), blocks)

    for part in parts:
        for role in sorted(r for r, stage in zero.items() if stage == 3):
            if GATHERED_FROM[role] == part or (part != "generate" and role == "actor"):
                for size, blocks in gather_classes(shapes[role], lora_r.get(role, 0), n, e).items():
                    need(size, blocks)
        role = trained.get(part)
        if role in zero and n > 1:
            trainable = shapes[role].trainable
            need(pow2(min(trainable, REDUCE_BUCKET) * e), 1)
            if zero[role] in (1, 2):  # the updated partitions gathered back into every rank's weights
                need(pow2(math.ceil(trainable / n) * e), n + 1)
        pool[part] = pool_bytes(classes)
    return pool
