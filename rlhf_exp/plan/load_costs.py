"""Each loader's load-stage cost for one rank: (transient above what the rank held, what it holds after).

Each named like the loader it costs (rlhf_exp/loaders/registry.py declares the loaders); the formulas are summarized in
rlhf_exp/plan/formulas.py's docstring.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from rlhf_exp.config.units import GIB
from rlhf_exp.plan.terms import LoadContext, RankMemory

# node memory outside the rank's RSS while zero.Init partitions on a GPU rank of its own (NCCL; h200-7b-zero3: 0.9-1.3
# GiB at each load stage); ranks sharing a GPU (gloo) showed none (plan-vs-measured-2026-12-06: 0.24 GiB a rank in all)
ZERO3_INIT_LOAD_DRIVER_HOST = 0.9 * GIB

Cost = tuple[RankMemory, RankMemory]


def _on_place(ctx: LoadContext, nbytes: float) -> RankMemory:
    """`nbytes` on the rank's device: the GPU on CUDA, private host memory on CPU."""
    return RankMemory(gpu=nbytes) if ctx.on_gpu else RankMemory(host_private=nbytes)


def naive(ctx: LoadContext) -> Cost:
    """fp32 model (4P), the private read at its peak: the tensors parsed so far and the raw bytes of the shard being
    parsed (one shard's bytes at a time, not a second whole copy); holds the fp32 model on the host."""
    p = ctx.shape.loaded
    return RankMemory(host_private=4 * p + ctx.shape.read_peak), RankMemory(host_private=4 * p)


def staggered(ctx: LoadContext) -> Cost:
    """As naive, but the rank casts and moves its model to its place, a parameter at a time, before the next group
    starts: on a GPU the cast weights and one fp32 tensor in flight; on the host the casts replace the fp32 tensors
    after the read, below naive's peak."""
    transient, _ = naive(ctx)
    weights = _on_place(ctx, ctx.engine_bytes * ctx.shape.loaded)
    on_gpu = RankMemory(gpu=weights.gpu + 4 * ctx.shape.largest_tensor) if ctx.on_gpu else RankMemory()
    return transient.plus(on_gpu), weights


def low_mem(ctx: LoadContext) -> Cost:
    """Mapped pages count in RSS once touched: a dtype conversion reads them all (and holds a converted copy);
    otherwise the weights are the untouched, lazily read mapping itself until something reads them."""
    ckpt = ctx.shape.checkpoint_bytes
    converted = ctx.engine_bytes * ctx.shape.loaded if ctx.convert else 0.0
    read = RankMemory(host_private=converted, host_mapped=ckpt if ctx.convert else 0.0)
    return read, RankMemory(host_private=converted, lazy=0.0 if ctx.convert else ckpt)


def direct(ctx: LoadContext) -> Cost:
    """On CUDA (fast_read): eP allocated on the GPU and filled through pinned staging buffers (host private), plus
    as many device staging buffers when the dtype is converted; no file page is mapped. On CPU: low_mem."""
    if not ctx.on_gpu:
        return low_mem(ctx)
    weights = ctx.engine_bytes * ctx.shape.loaded
    if not ctx.staging_bytes:  # loader.fast_read=false: from_pretrained maps the file while it copies to the GPU
        return RankMemory(host_mapped=ctx.shape.checkpoint_bytes, gpu=weights), RankMemory(gpu=weights)
    staging = RankMemory(host_private=ctx.staging_bytes, gpu=ctx.staging_bytes if ctx.convert else 0.0)
    return staging.plus(RankMemory(gpu=weights)), RankMemory(gpu=weights)


def twin_copy(ctx: LoadContext) -> Cost:
    """ref/reward copied from actor's/critic's engine on the GPU (loaders/twin.py): eP allocated there, no host memory."""
    weights = RankMemory(gpu=ctx.engine_bytes * ctx.shape.loaded)
    return weights, weights


def rank0_broadcast(ctx: LoadContext) -> Cost:
    """Local rank 0 loads as direct; every other rank allocates eP on its place and receives it."""
    if ctx.local_rank == 0:
        return direct(ctx)
    place = _on_place(ctx, ctx.engine_bytes * ctx.shape.loaded)
    return place, place


def zero3_init(ctx: LoadContext) -> Cost:
    """The rank's partition eP/N filling on its place. Its own read (fast_read): one weight file mapped at a time
    (each unmapped when read), of which the rank touches its share of every tensor, so the largest file / N, and
    the rows holding its share of one tensor copied out of the mapping (the largest tensor / N, in the checkpoint's
    dtype). Measured: RssFile rose 1.96 GiB at gpus=1 and 0.27 at 8 ranks on the 13B's 2 GiB shards (H200,
    bench/results/fit-check-2026-12-05, zero3-profile-2026-12-05), 1.91 GiB for llama-1.3b's on CPU.
    from_pretrained (fast_read=false): the checkpoint mapped, plus the largest tensor gathered."""
    e, shape = ctx.engine_bytes, ctx.shape
    part = _on_place(ctx, e * shape.loaded / ctx.ranks)
    driver = RankMemory(host_outside=ZERO3_INIT_LOAD_DRIVER_HOST if ctx.nccl else 0.0)
    if ctx.staging_bytes:
        stored = shape.checkpoint_bytes / max(1, shape.loaded)  # bytes per element as stored
        share = RankMemory(host_private=stored * shape.largest_tensor / ctx.ranks, host_mapped=shape.largest_file / ctx.ranks)
        whole = _on_place(ctx, e * shape.largest_tensor)  # zero.Init makes each weight whole, then partitions it
        return part.plus(share).plus(driver).plus(whole), part
    gathered = _on_place(ctx, e * shape.largest_tensor)
    return part.plus(gathered).plus(RankMemory(host_mapped=shape.checkpoint_bytes)).plus(driver), part


def reads_fast(cost: Callable[[LoadContext], Cost], ctx: LoadContext) -> bool:
    """Whether this rank's load goes through fast_read onto its GPU (direct's path), which hands torch's cached pinned
    blocks back as it ends (fast_read.release_pinned_cache)."""
    direct_path = cost is direct or (cost is rank0_broadcast and ctx.local_rank == 0)
    return direct_path and ctx.on_gpu and bool(ctx.staging_bytes)


def of_loader(name: str) -> Callable[[LoadContext], Cost]:
    """The plan cost of loader `name`: this module's function of that name (tests/unit/test_formulas.py checks that
    every declared loader has one)."""
    return getattr(sys.modules[__name__], name)
