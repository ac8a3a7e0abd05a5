"""The memory planner: per-stage memory predicted from shapes, dtypes, ZeRO, LoRA, loader, ranks and machine.

All formulas live here; each loader's load cost is a function in plan/load_costs.py, named by its declaration in
loaders/registry.py, and the PPO step's in plan/ppo_costs.py. Per role: P parameters as loaded (no LoRA, no value
head), A the adapters added after loading (LoRA + value head), T trainable, C checkpoint bytes, R naive's read peak
(max over shards of the bytes parsed so far plus the shard's raw bytes), e engine-dtype bytes, N ranks of the job,
L ranks of one node (target machine), Z the role's ZeRO stage, g the staggered group size, S fast_read's buffers
(threads x 2 x chunk). "place" is where a rank's weights end up: the host on CPU, the GPU on CUDA. The runs named
below are under bench/results/ (h200-7b-*: llama-7b pair on one H200, 2026-12-03; h200-1gpu-plan: 2026-12-02).

load (transient above what the rank held before; what it holds after); the adapters, eA (fp32 after naive), are
added on the weights' place in the same stage
  naive            4P + R private (fp32 model, zero-filled; the private read one shard's bytes at a time, not a
                   second whole copy: h200-7b-zero2 38.8 GiB measured, 40.3 planned); holds 4P on the host
  staggered        as naive, but holds eP on its place after its turn; node: g ranks at once
  low_mem          eP private and C mapped (read, so in RSS) when the dtypes differ (a converted copy);
                   nothing when they match (the weights are the mapping, untouched until a forward pass)
  direct           low_mem on CPU; on CUDA, fast_read: S pinned on the host (and S on the GPU when converting) while
                   eP fills on the GPU, no page mapped; loader.fast_read=false: C mapped on the host, eP on the GPU
                   ref/reward on CUDA with loader.copy_twin (ZeRO < 3 on actor/critic): eP copied on the GPU, no host
  rank0_broadcast  local rank 0 as direct; every other rank eP private on its place
  zero3_init       eP/N (its partition) on its place; its own read (fast_read): F/N mapped (F: the largest weight
                   file, mapped one at a time; its share of the pages)
                   and its share of the largest tensor private, as stored; fast_read=false (from_pretrained): C mapped
                   plus the largest tensor being gathered; both plus ZERO3_INIT_LOAD_DRIVER_HOST outside the rank on a GPU
init (deepspeed.initialize)
  broadcast        with N > 1, weights still an unread mapping are read by rank 0 (C into its RSS) and written by the
                   others (C private each, copy-on-write)
  weights          fp32 host models are cast to e (transient: the largest tensor); on CUDA they move to the GPU
                   (weights a load put on the GPU already: no host transient);
                   under ZeRO-3 a rank keeps eP/N
  optimizer        4T bytes held (the fp32 master copy), divided by N for ZeRO >= 1; Adam's m and v and the fp32
                   gradients appear at the first step (ppo_costs); with train.optimizer_states_at_init (DeepSpeed
                   0.9's timing) ZeRO-1/2's m and v, 8T/N, are held from init on, and a zero fp32 gradient 4T/N is
                   transient there. ZeRO-3 train roles on a GPU also hold DeepSpeed's
                   gradient bucket, reduce_bucket_size (5e8) x e, and pass ZERO3_INIT_HOST of host transient
  offload          the optimizer (and under ZeRO-3 the weights' partition) in host memory instead of the GPU
  GPU-rank runtime from the first init: CUDA_RUNTIME_HOST held per rank (GLOO_RUNTIME_HOST on ranks sharing a GPU
                   whose first engine is replicated; FIRST_GPU_LOAD_HOST from the first load where that load allocates
                   on the GPU); with ZeRO-3, ZERO3_DRIVER_HOST of node memory outside the rank's RSS
  broadcast        ranks sharing a GPU (gloo), N > 1: a replicated (ZeRO-0/1/2) engine's broadcast pins a block of
                   each parameter size (gloo_staging.py), held until a fast_read load empties torch's pinned pool
PPO (ppo_costs.py): KV cache, logits, activations, gradients and Adam; on GPU ranks also a host share per part,
and what the engine stages left in glibc's arenas (HEAP_KEPT of the largest host rise; NODE_KEPT_FP32 more,
outside the rank, after naive's fp32 models); on GPU ranks sharing a GPU (gloo), the step's collectives (ZeRO-3's
gathers, the gradient reduces, ZeRO-1/2's gather of the updated weights) staged through torch's pinned host pool
(gloo_staging.py), held from the part that grows it, on top of the engine's blocks; on CPU ranks under ZeRO-3 at
N > 1, gloo gathers through a copy (CPU_GATHER_COPIES) and glibc's arenas keep the heap's high-water: each part
rises only by what it needs beyond what the parts before it left there.

A rank's planned peak in a stage = base RSS (a probe process that imported the rank's libraries and, on GPU,
made a CUDA context: plan.inputs.probe_rank_base) + what it holds from earlier stages + the stage's transient.
The node's = L x the base's private part (library pages are page cache) + the sum over the node's ranks of
private held + transient + memory outside the ranks (file pages excluded: the kernel counts page cache as
available). GPU: torch's allocations per rank; what the device holds adds the allocator's reserve
(ALLOCATOR_RESERVE) and the CUDA context (CUDA_CONTEXT_GPU); what a card must have, the fit check's figure, adds
only the context: under a full card torch gives its cache back before it raises an out-of-memory.
"""

from __future__ import annotations

from dataclasses import replace

from rlhf_exp.config.deepspeed import REDUCE_BUCKET
from rlhf_exp.config.roles import ROLES, TRAIN_ROLES
from rlhf_exp.config.schema import RunSettings, role_stage
from rlhf_exp.config.stages import DIST_INIT, engine_stage, ppo_stage
from rlhf_exp.config.units import DTYPE_BYTES, GIB
from rlhf_exp.loaders.registry import LoaderSpec, get_spec
from rlhf_exp.loaders.twin import twin_source
from rlhf_exp.plan import gloo_staging, load_costs
from rlhf_exp.plan.machine import Target
from rlhf_exp.plan.ppo_costs import adam_states, ppo_costs, states_at_init
from rlhf_exp.plan.terms import LoadContext, Plan, RankBase, RankMemory, RoleShape, StagePlan

TRAINED = {"train_actor": "actor", "train_critic": "critic"}  # the PPO parts that step a role's optimizer

MASTER_BYTES_PER_TRAINABLE = 4  # fp32 master weights, created by deepspeed.initialize
# What the GPU holds beyond torch's allocations (compared with the card's memory): the CUDA context and the
# caching allocator's reserve above the allocated peak. Fitted on the H200 (bench/results/h200-*: NVML used vs
# torch.cuda peak allocated, every stage).
CUDA_CONTEXT_GPU = 1.75 * GIB  # NVML used at actor.load before torch allocates (h200-1gpu-plan)
CUDA_CONTEXT_HOST = 0.5 * GIB  # a rank's RSS after its first CUDA call, less before (probe_rank_base cuda - cpu)
# node memory a rank's CUDA context holds outside every process's RSS (the driver's own allocations): the node figure
# less the ranks' Pss_Anon at dist_init, 0.04-0.14 GiB a CUDA rank (median 0.085) in 100 runs of bench/results at 1, 2
# and 8 ranks, about 0 on CPU ranks (runs where a neighbour freed memory meanwhile left out)
CUDA_CONTEXT_OUTSIDE = 0.085 * GIB
# host memory a GPU rank keeps once its first engine is initialised (CUDA runtime, NCCL, DeepSpeed state): node
# figures of direct at gpus=1 on the H200 (h200-7b-zero2: 0.92-0.96 GiB at init stages vs 0.71 without it)
CUDA_RUNTIME_HOST = 0.25 * GIB
# the same on ranks sharing a GPU through gloo (no NCCL) whose first engine is replicated (ZeRO-0/1/2), beside the pinned
# blocks of its broadcast (gloo_staging): llama-1.3b pair at 4 ranks on the H100, every rank's Pss_Anon 0.053 GiB up at
# actor.init, 0.068 by reward.init (plan-vs-measured-2026-12-06-3); a ZeRO-3 first engine keeps 0.20-0.23 there
# (plan-vs-measured-2026-12-06, 8 ranks): CUDA_RUNTIME_HOST
GLOO_RUNTIME_HOST = 0.06 * GIB
# and what a GPU rank keeps from a load that already allocates on the GPU (direct, rank0_broadcast, zero3_init): llama-1.3b
# at 8 ranks sharing the H100, every rank's Pss_Anon 0.12 GiB up at actor.load and no lower later, the node 1.0 GiB
# (plan-vs-measured-2026-12-06); at gpus=1 direct's node stood 0.1-0.35 GiB above its plan from actor.load on (13B)
FIRST_GPU_LOAD_HOST = 0.12 * GIB
# glibc keeps a share of the largest host transient of deepspeed.initialize in its arenas after it is freed; seen in
# the PPO stages of low_mem (13.3 GiB at init, 0.4-0.75 GiB kept) on the H200 (h200-7b-zero2)
HEAP_KEPT = 0.03
# after deepspeed.initialize cast naive's fp32 host models (at 7B and 13B alike): the rank's Pss_Anon at reward.init
# stands 1.35 GiB above direct's at 7B (h200-7b-zero2) and 1.34 at 13B (fit-check-2026-12-05, seed-2026-12-05);
# staggered, which casts its own model, keeps none
HEAP_KEPT_FP32 = 1.35 * GIB
# and node memory outside the rank's RSS in the PPO stages: 1.6 GiB at 7B (h200-7b-zero2), 1.4 in the seed's short
# step at 13B (seed-2026-12-05), 1.0 draining to 0 over the seed's 512-token step (fit-check-2026-12-05)
NODE_KEPT_FP32 = 1.3 * GIB
# both at most this share of deepspeed.initialize's largest rise (7B: 26.5 GiB -> 1.33): a small model keeps little
FP32_KEPT_SHARE = 0.05
# deepspeed.initialize of a ZeRO-3 train role on a GPU rank of its own (NCCL): host transient of partitioning
# (h200-7b-zero3: VmHWM rise 0.91 / 0.99 GiB at actor.init / critic.init)
ZERO3_INIT_HOST = 0.7 * GIB
# node memory outside the ranks' RSS that a NCCL rank's ZeRO-3 work adds (driver allocations behind DeepSpeed's
# partitioning and gathering), h200-7b-zero3: node 0.8 GiB above the rest from the first ZeRO-3 init on. Neither shows
# on ranks sharing a GPU through gloo: 0.04-0.22 GiB a rank at each init, CUDA_RUNTIME_HOST's share included
# (llama-1.3b at 8 ranks, bench/results/plan-vs-measured-2026-12-06)
ZERO3_DRIVER_HOST = 0.8 * GIB  # (zero3_init's load stages: load_costs.ZERO3_INIT_LOAD_DRIVER_HOST)
ALLOCATOR_RESERVE = 0.10  # NVML peak - context over torch's peak: 8-14 % from reward.init on (h200-1gpu-plan)
# the planner's error on torch's peak, which the fit check allows for (fit.py): the largest under-plan of a stage within
# tolerance, 3.6 % (llama-1.3b train_critic, gpu-peaks-2026-12-06), 2.7-2.9 % at 7B and 13B (h200-7b-zero3,
# fit-check-2026-12-05)
GPU_PLAN_ERROR = 0.04


def _gib(n: float) -> float:
    return round(n / GIB, 4)


def init_cost(
    spec: LoaderSpec,
    held: RankMemory,
    shape: RoleShape,
    e: int,
    n: int,
    zero: int,
    train: bool,
    on_gpu: bool,
    local_rank: int,
    offload: bool = False,
    nccl: bool = True,
) -> tuple[RankMemory, RankMemory]:
    """(transient, held after) of deepspeed.initialize given what the load left (`held`).

    deepspeed.initialize broadcasts every weight from rank 0 when N > 1: rank 0 reads its lazily mapped
    weights (file pages into its RSS), every other rank writes into its private mapping (copy-on-write:
    private memory)."""
    p = shape.params
    optimizer = MASTER_BYTES_PER_TRAINABLE * shape.trainable / (n if zero >= 1 else 1) if train else 0.0
    # ZeRO-3 allocates its gradient bucket at init; torch.empty: device memory on a GPU, untouched (no RSS) on a host
    bucket = e * REDUCE_BUCKET if train and zero == 3 and on_gpu else 0.0
    partitioning = ZERO3_INIT_HOST if train and zero == 3 and on_gpu and nccl else 0.0
    weights = e * p / n if zero == 3 and not spec.partitioned else None
    if on_gpu and offload:  # DeepSpeed keeps the optimizer (and under ZeRO-3 the parameters) in host memory
        on_host = optimizer + (weights or 0.0)
        gpu = 0.0 if weights is not None else (held.gpu or e * p)
        after = RankMemory(host_private=on_host, gpu=gpu + bucket)
        moving = RankMemory(
            held.host_private + on_host + e * shape.largest_tensor, held.host_mapped + held.lazy, max(held.gpu, gpu)
        )
        return moving, after
    if on_gpu:  # the loaded weights move to the GPU; the host copy is freed afterwards
        gpu = weights if weights is not None else (held.gpu or e * p)
        if weights is None and zero == 3:  # initialize partitions what was added whole after a partitioned load
            # (LoRA, the value head): llama-1.3b's 0.22 GiB of adapters at 8 ranks leave at actor.init but 0.03
            # (gpu-peaks-2026-12-06: the init's peak 1.36 GiB, 1.58 planned while they stayed)
            gpu -= e * (p - shape.loaded) * (1 - 1 / n)
        after = RankMemory(gpu=gpu + optimizer + bucket)
        moving = RankMemory(
            held.host_private + (0.0 if held.gpu else e * shape.largest_tensor) + partitioning,  # a cast of host weights
            held.host_mapped + held.lazy,
            max(held.gpu, after.gpu + optimizer),
        )
        return moving, after
    touched = held.lazy if n > 1 else 0.0
    held = RankMemory(
        held.host_private + (touched if local_rank else 0.0),
        held.host_mapped + (0.0 if local_rank else touched),
        held.gpu,
        held.lazy - touched,
    )
    if weights is not None:
        after = RankMemory(host_private=weights + optimizer)
    elif spec.fp32_model:  # the fp32 model is cast tensor by tensor
        after = RankMemory(host_private=e * p + optimizer)
    else:
        after = RankMemory(host_private=held.host_private + optimizer, host_mapped=held.host_mapped, lazy=held.lazy)
    transient = RankMemory(max(held.host_private, after.host_private + optimizer) + e * shape.largest_tensor, held.host_mapped)
    return transient, after


def make_plan(settings: RunSettings, loader: str, shapes: dict[str, RoleShape], target: Target, base: RankBase) -> Plan:
    """Every stage of a job with `loader` on `target`. base: a rank's footprint before any model.

    N (ZeRO's divisor) is every rank of the job; node figures sum the ranks of one node (target.ranks_per_node)."""
    spec = get_spec(loader)
    n, local, on_gpu = settings.gpus, target.ranks_per_node, target.device == "cuda"
    nccl = on_gpu and target.ranks_per_gpu == 1  # ranks sharing a GPU talk through gloo
    e, convert = DTYPE_BYTES[settings.dtype], settings.dtype != settings.model.checkpoint_dtype
    g = min(settings.loader.group_size, local) if spec.takes_turns else local
    staging = fast_read_staging(settings, target) if settings.loader.fast_read else 0.0
    plan = Plan(loader, n, target.device, _gib(base.rss), local, _gib(base.private))
    if on_gpu:  # what the node holds per rank before any model: the probe's private memory and the driver's share
        base = RankBase(base.rss, base.private + CUDA_CONTEXT_OUTSIDE)
    plan.stages.append(StagePlan(DIST_INIT, _gib(base.rss), 0.0, _gib(local * base.private), 0.0, _gpu_device(0.0, on_gpu)))
    held = [RankMemory() for _ in range(local)]  # what each rank of the node holds from finished stages
    gloo = on_gpu and not nccl and n > 1  # ranks sharing a GPU: their collectives go through torch's pinned pool
    pools: list[gloo_staging.Pool] = [{} for _ in range(local)]  # each rank's pinned blocks, held within `held`
    for role in settings.roles:
        shape, zero = shapes[role], role_stage(getattr(settings.zero, role))
        contexts = [LoadContext(shape, e, convert, n, on_gpu, r, staging, nccl) for r in range(local)]
        load_cost = load_costs.twin_copy if twin_source(settings, spec, role, on_gpu) else load_costs.of_loader(loader)
        costs = [_with_adapters(spec, load_cost(ctx), shape, e) for ctx in contexts]
        earlier = settings.roles[: settings.roles.index(role)]
        zero3_before = any(role_stage(getattr(settings.zero, r)) == 3 for r in earlier)
        if zero3_before:
            # the driver's share a ZeRO-3 load takes outside the rank is held already since the first ZeRO-3 init
            # (ZERO3_DRIVER_HOST): 13B at gpus=1, node 1.6-1.9 GiB at ref/critic/reward.load, not 2.7 (fit-check-2026-12-05)
            costs = [(replace(t, host_outside=0.0), after) for t, after in costs]
        first = RankMemory()  # what the rank's first GPU allocations keep, where a load makes them
        if on_gpu and not earlier and any(after.gpu for _, after in costs):
            first = RankMemory(host_private=FIRST_GPU_LOAD_HOST)
            costs = [(t.plus(first), after.plus(first)) for t, after in costs]
        _add_stage(plan, engine_stage(role, "load"), held, costs, base, g, on_gpu)
        for r, ctx in enumerate(contexts):  # a fast_read load empties the pinned pool as it ends
            if pools[r] and load_costs.reads_fast(load_cost, ctx):
                held[r] = held[r].plus(RankMemory(host_private=-gloo_staging.pool_bytes(pools[r])))
                pools[r] = {}
        load_held = [after for _, after in costs]
        offload = getattr(settings.zero, role).offload
        train = role in TRAIN_ROLES
        costs = [init_cost(spec, load_held[r], shape, e, n, zero, train, on_gpu, r, offload, nccl) for r in range(local)]
        first_zero3 = zero == 3 and not zero3_before
        runtime = RankMemory(  # what a GPU rank's runtime adds once, from this init on
            host_private=(CUDA_RUNTIME_HOST if nccl or zero == 3 else GLOO_RUNTIME_HOST) if on_gpu and not earlier else 0.0,
            host_outside=ZERO3_DRIVER_HOST if nccl and first_zero3 else 0.0,
        )
        # the ZeRO-3 driver share shows during init when the load already partitioned (zero3_init), after it otherwise
        during = runtime if spec.partitioned else RankMemory(host_private=runtime.host_private)
        costs = [(t.plus(during), after.plus(runtime).plus(first)) for t, after in costs]  # init moves no host share
        states = states_at_init(settings, role, shape, n)  # DeepSpeed 0.9's timing: Adam's states now, not at the step
        if states:
            place = (lambda b: RankMemory(gpu=b)) if on_gpu and not offload else (lambda b: RankMemory(host_private=b))
            zero_grads = states / 2  # 0.9's zero fp32 gradient of the partition, during its step
            costs = [(t.plus(place(states + zero_grads)), after.plus(place(states))) for t, after in costs]
        if gloo and zero < 3:  # the replicated model's broadcast from rank 0 pins a block of each parameter size
            broadcast = gloo_staging.broadcast_classes(shape, _lora_r(settings).get(role, 0), e)
            for r in range(local):
                pool = gloo_staging.merged(pools[r], broadcast)
                grown = RankMemory(host_private=gloo_staging.pool_bytes(pool) - gloo_staging.pool_bytes(pools[r]))
                costs[r], pools[r] = (costs[r][0].plus(grown), costs[r][1].plus(grown)), pool
        _add_stage(plan, engine_stage(role, "init"), held, costs, base, local, on_gpu)  # counts the loaded model
        plan.stages[-1].optimizer_state_gib = round(states / GIB, 6)  # as the ranks record it
        held = [held[r].plus(costs[r][1]) for r in range(local)]
    if settings.ppo.steps and set(settings.roles) == set(ROLES):  # the first step: later ones repeat it
        # what deepspeed.initialize freed (a cast or a move to the GPU) is what the arenas keep a share of: staggered,
        # whose fp32 transient is its own load's, keeps none (seed-2026-12-05: Pss_Anon as direct's after its engine)
        inits = {engine_stage(r, "init") for r in settings.roles}
        largest = max((st.rank_rise_gib for st in plan.stages if st.stage in inits), default=0.0) * GIB
        kept = RankMemory(
            host_private=(min(HEAP_KEPT_FP32, FP32_KEPT_SHARE * largest) if spec.fp32_model else HEAP_KEPT * largest)
            if on_gpu
            else 0.0,
            host_outside=min(NODE_KEPT_FP32, FP32_KEPT_SHARE * largest) if on_gpu and spec.fp32_model else 0.0,
        )
        held = [h.plus(kept) for h in held]
        steps = ppo_costs(settings, shapes, n, on_gpu)
        engine_pool = max(pools, key=gloo_staging.pool_bytes)  # the PPO step's blocks join the engine's
        pinned = _gloo_staging([part for part, _, _ in steps], settings, shapes, n, e, engine_pool) if gloo else {}
        pinned_before = gloo_staging.pool_bytes(engine_pool)
        # the step's host allocations come out of what glibc's arenas keep first. After naive's fp32 models that is
        # `kept` (naive at 7B: VmHWM 0.87 GiB above direct's in every PPO part, not the 1.35 kept plus the 0.45-0.75 the
        # parts take). On CPU ranks under ZeRO-3 at N > 1 the arenas also keep the heap's high-water of the gathers, so
        # what a part needs beyond them stays (memory/heap.py; medium pair at 4 ranks: heap_free 0.23-0.26 GiB after
        # generate and 0.31-0.34 after train_actor, cpu-zero3-heap-2026-12-06)
        arena = kept.host_private if spec.fp32_model else 0.0
        arena_grows = not on_gpu and n > 1 and any(role_stage(getattr(settings.zero, r)) == 3 for r in settings.roles)
        for part, transient, after in steps:
            if pinned:  # the pinned pool grows by this part's new blocks and keeps them
                grown = RankMemory(host_private=pinned[part] - pinned_before)
                transient, after, pinned_before = transient.plus(grown), after.plus(grown), pinned[part]
            beyond = max(0.0, transient.host_private - arena)
            transient = replace(transient, host_private=beyond)
            if arena_grows:
                after, arena = after.plus(RankMemory(host_private=beyond)), arena + beyond
            _add_stage(plan, ppo_stage(1, part), held, [(transient, after)] * local, base, local, on_gpu)
            if part in TRAINED:  # the role's states after its step, whenever they came
                role = TRAINED[part]
                stage = role_stage(getattr(settings.zero, role))
                plan.stages[-1].optimizer_state_gib = round(adam_states(shapes[role], stage, n) / GIB, 6)
            held = [h.plus(after) for h in held]
    return plan


def _lora_r(settings: RunSettings) -> dict[str, int]:
    """Each role's adapter rank (trained roles with LoRA on)."""
    return {role: settings.lora.r for role in TRAIN_ROLES if settings.lora.enabled}


def _gloo_staging(
    parts: list[str], settings: RunSettings, shapes: dict[str, RoleShape], n: int, e: int, start: gloo_staging.Pool
) -> dict[str, float]:
    """Ranks sharing a GPU (gloo): the pinned pool the PPO step's collectives leave, after each part, from `start`."""
    zero = {role: role_stage(getattr(settings.zero, role)) for role in settings.roles}
    return gloo_staging.staging_pool(parts, shapes, zero, TRAINED, _lora_r(settings), n, e, start)


def fast_read_staging(settings: RunSettings, target: Target) -> float:
    """Bytes of fast_read's buffers per rank: threads x 2 x chunk, with the loaders' own thread count."""
    threads = settings.loader.threads_per_rank(target.cores_per_node(), target.ranks_per_node)
    return threads * 2 * settings.loader.chunk_mib * 2**20


def _with_adapters(
    spec: LoaderSpec, cost: tuple[RankMemory, RankMemory], shape: RoleShape, e: int
) -> tuple[RankMemory, RankMemory]:
    """The load stage also adds LoRA and the value head (params - loaded) beside the loaded weights, in their dtype."""
    transient, after = cost
    nbytes = (shape.params - shape.loaded) * (4 if spec.fp32_model else e)
    added = RankMemory(gpu=nbytes) if after.gpu else RankMemory(host_private=nbytes)
    return transient.larger(after.plus(added)), after.plus(added)


def _gpu_device(allocated: float, on_gpu: bool) -> float:
    """What the device holds for a rank whose torch allocations peak at `allocated` bytes (GiB), where it has room."""
    return _gib(allocated * (1 + ALLOCATOR_RESERVE) + CUDA_CONTEXT_GPU) if on_gpu else 0.0


def _gpu_need(allocated: float, on_gpu: bool) -> float:
    """What a card must have for that rank (GiB): its allocations and the CUDA context, no cache."""
    return _gib(allocated + CUDA_CONTEXT_GPU) if on_gpu else 0.0


def _add_stage(
    plan: Plan,
    name: str,
    held: list[RankMemory],
    costs: list[tuple[RankMemory, RankMemory]],
    base: RankBase,
    group: int,
    on_gpu: bool,
) -> None:
    """One stage's figures from what ranks held before it and each rank's (transient, held after).

    `group`: ranks in their transient at once (all N, unless the loader takes turns)."""
    n = len(held)
    peaks = [held[r].plus(costs[r][0]) for r in range(n)]
    rank_rise = max(p.host_private + p.host_mapped for p in peaks)
    gpu = max(p.gpu for p in peaks)
    before_private = sum(h.node_bytes() for h in held)
    transient_private = [transient.node_bytes() for transient, _ in costs]
    done = [after.node_bytes() for _, after in costs]
    # one group at a time; the groups before it hold what they keep (one group of N: everyone at once)
    node = max(
        before_private + sum(transient_private[t * group : (t + 1) * group]) + sum(done[: t * group])
        for t in range((n + group - 1) // group)
    )
    plan.stages.append(
        StagePlan(
            name,
            rank_peak_gib=_gib(base.rss + rank_rise),
            rank_rise_gib=_gib(rank_rise),
            node_peak_gib=_gib(n * base.private + node),
            gpu_rank_gib=_gib(gpu),
            gpu_device_gib=_gpu_device(gpu, on_gpu),
            gpu_need_gib=_gpu_need(gpu, on_gpu),
            rank_file_gib=_gib(base.rss - base.private + max(p.host_mapped for p in peaks)),
        )
    )
