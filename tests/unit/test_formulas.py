"""The planner's formulas on synthetic shapes (rlhf_exp/plan/formulas.py docstring), no model or process."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import compose_settings

from rlhf_exp.config.deepspeed import REDUCE_BUCKET
from rlhf_exp.config.units import GIB
from rlhf_exp.loaders.registry import LOADERS
from rlhf_exp.plan import load_costs
from rlhf_exp.plan.formulas import (
    CUDA_CONTEXT_OUTSIDE,
    FIRST_GPU_LOAD_HOST,
    MASTER_BYTES_PER_TRAINABLE,
    make_plan,
)
from rlhf_exp.plan.machine import Target, local_target
from rlhf_exp.plan.terms import LoadContext, Plan, RankBase, RankMemory, RoleShape

P = 1_000_000_000  # one billion parameters per role
C = 2 * P  # an fp16 checkpoint
T = 10_000_000  # LoRA + head
LARGEST = 100_000_000
BASE = RankBase(rss=0.5 * GIB, private=0.3 * GIB)
GPU_RANK_BASE = BASE.private + CUDA_CONTEXT_OUTSIDE  # what a GPU rank's node share starts from: the driver's part too
SHAPES = {
    role: RoleShape(P, T if role in ("actor", "critic") else 0, C, LARGEST) for role in ("actor", "ref", "critic", "reward")
}


def on(device: str, settings) -> Target:
    """One node holding every rank of the job, with room to spare (the formulas do not read capacity)."""
    return local_target(settings, device, 1000 * GIB, 1000 * GIB, 80 * GIB if device == "cuda" else None, settings.gpus)


def stage(plan: Plan, name: str):
    return next(st for st in plan.stages if st.stage == name)


def gib(n: float) -> float:
    return round(n / GIB, 4)


@pytest.mark.parametrize("ranks", [1, 4])
def test_naive_load_holds_an_fp32_model_and_the_read_on_every_rank_at_once(ranks: int) -> None:
    settings = compose_settings(f"gpus={ranks}")
    plan = make_plan(settings, "naive", SHAPES, on("cpu", settings), BASE)
    load = stage(plan, "actor.load")
    assert load.rank_rise_gib == gib(4 * P + 2 * C)
    assert load.node_peak_gib == gib(ranks * (BASE.private + 4 * P + 2 * C))
    assert stage(plan, "dist_init").node_peak_gib == gib(ranks * BASE.private)


def test_staggered_node_peak_is_one_group_at_a_time() -> None:
    settings = compose_settings("gpus=4", "loader=staggered", "loader.group_size=2")
    load = stage(make_plan(settings, "staggered", SHAPES, on("cuda", settings), BASE), "actor.load")
    transient = 4 * P + 2 * C
    # on a GPU, finished ranks keep on the host only what their first GPU allocations left
    assert load.node_peak_gib == gib(4 * GPU_RANK_BASE + 2 * transient + 4 * FIRST_GPU_LOAD_HOST)
    naive = stage(make_plan(settings, "naive", SHAPES, on("cuda", settings), BASE), "actor.load")
    assert naive.node_peak_gib == gib(4 * GPU_RANK_BASE + 4 * transient)


def test_direct_on_gpu_puts_the_engine_dtype_weights_on_the_gpu_through_staging_buffers() -> None:
    settings = compose_settings("gpus=2", "dtype=bf16", "loader=direct", "loader.read_threads=4", "loader.chunk_mib=8")
    load = stage(make_plan(settings, "direct", SHAPES, on("cuda", settings), BASE), "actor.load")
    staging = 4 * 2 * 8 * 2**20  # threads x two buffers x chunk, pinned; on the GPU too: fp16 -> bf16 is converted there
    assert load.gpu_rank_gib == gib(2 * P + staging)
    first = FIRST_GPU_LOAD_HOST  # the host side of the rank's first GPU allocations
    assert load.rank_rise_gib == gib(staging + first) and load.node_peak_gib == gib(2 * (GPU_RANK_BASE + staging + first))
    library = compose_settings("gpus=2", "dtype=bf16", "loader=direct", "loader.fast_read=false")
    load = stage(make_plan(library, "direct", SHAPES, on("cuda", library), BASE), "actor.load")
    assert load.gpu_rank_gib == gib(2 * P) and load.rank_rise_gib == gib(C + first)  # from_pretrained maps the file
    assert load.node_peak_gib == gib(2 * (GPU_RANK_BASE + first))  # mapped file pages are page cache, not used memory


def test_staggered_on_gpu_casts_and_moves_a_tensor_at_a_time_so_the_card_never_holds_the_fp32_model() -> None:
    settings = compose_settings("gpus=1", "loader=staggered")
    plan = make_plan(settings, "staggered", SHAPES, on("cuda", settings), BASE)
    load = stage(plan, "actor.load")
    assert load.gpu_rank_gib == gib(2 * P + 4 * LARGEST)  # the fp16 weights and one fp32 tensor in flight
    assert load.rank_rise_gib >= gib(4 * P + 2 * C)  # the host still builds naive's fp32 model and private read


@pytest.mark.parametrize("loader", ["direct", "rank0_broadcast"])  # rank0_broadcast: local rank 0 reads as direct
def test_ref_and_reward_are_copied_on_the_gpu_unless_told_to_read_or_the_twin_is_partitioned(loader: str) -> None:
    staging = gib(4 * 2 * 8 * 2**20)  # pinned on the host, and on the GPU too (fp16 -> bf16 is converted there)

    def plan(*overrides: str) -> Plan:
        settings = compose_settings("gpus=2", f"loader={loader}", "loader.read_threads=4", "loader.chunk_mib=8", *overrides)
        return make_plan(settings, loader, SHAPES, on("cuda", settings), BASE)

    copy, read = plan(), plan("loader.copy_twin=false")
    for role in ("ref", "reward"):
        copied, reread = stage(copy, f"{role}.load"), stage(read, f"{role}.load")
        assert copied.rank_rise_gib == pytest.approx(reread.rank_rise_gib - staging, abs=1e-3), role
        assert copied.gpu_rank_gib == pytest.approx(reread.gpu_rank_gib - staging, abs=1e-3), role
    # a ZeRO-3 actor's weights are spread over the ranks: ref reads the file; reward still copies the critic's
    partitioned, partitioned_read = plan("zero.actor.stage=3"), plan("zero.actor.stage=3", "loader.copy_twin=false")
    assert stage(partitioned, "ref.load") == stage(partitioned_read, "ref.load")
    assert stage(partitioned, "reward.load").gpu_rank_gib < stage(partitioned_read, "reward.load").gpu_rank_gib
    cpu = compose_settings("gpus=2", f"loader={loader}")  # CPU ranks read: nothing on a GPU to copy
    assert stage(make_plan(cpu, loader, SHAPES, on("cpu", cpu), BASE), "ref.load").gpu_rank_gib == 0.0


def test_init_adds_the_fp32_master_of_the_trainable_parameters_divided_under_zero() -> None:
    for zero, divisor in (("stage0", 1), ("stage2", 2)):
        settings = compose_settings("gpus=2", f"zero={zero}", "loader=direct", "loader.fast_read=false")  # no staging
        plan = make_plan(settings, "direct", SHAPES, on("cuda", settings), BASE)
        grew = stage(plan, "actor.init").gpu_rank_gib - stage(plan, "actor.load").gpu_rank_gib
        assert grew == pytest.approx(gib(2 * MASTER_BYTES_PER_TRAINABLE * T / divisor), abs=1e-3), zero


def test_zero3_partitions_weights_and_allocates_the_gradient_bucket_on_gpu() -> None:
    settings = compose_settings("gpus=4", "zero=stage3", "loader=zero3_init")
    plan = make_plan(settings, "zero3_init", SHAPES, on("cuda", settings), BASE)
    load = stage(plan, "actor.load")
    # each rank reads its share into its partition; zero.Init makes each weight whole before partitioning it
    assert load.gpu_rank_gib == gib(2 * P / 4 + 2 * LARGEST)
    library = compose_settings("gpus=4", "zero=stage3", "loader=zero3_init", "loader.fast_read=false")
    gathered = stage(make_plan(library, "zero3_init", SHAPES, on("cuda", library), BASE), "actor.load")
    assert gathered.gpu_rank_gib == gib(2 * P / 4 + 2 * LARGEST)  # from_pretrained: plus the tensor being gathered
    ref_init = stage(plan, "ref.init").gpu_rank_gib
    actor_held = 2 * P / 4 + MASTER_BYTES_PER_TRAINABLE * T / 4 + 2 * REDUCE_BUCKET
    assert ref_init >= gib(actor_held)


def test_every_declared_loader_has_a_plan_cost_for_every_rank() -> None:
    shape = SHAPES["actor"]
    for spec in LOADERS.values():
        for on_gpu in (False, True):
            for local_rank in (0, 1):
                transient, held = load_costs.of_loader(spec.name)(LoadContext(shape, 2, True, 2, on_gpu, local_rank))
                assert transient.host_private + transient.host_mapped + transient.gpu >= 0, spec.name
                assert held.host_private >= 0 and held.gpu >= 0, spec.name


WIDE = RoleShape(P, T, C, LARGEST, layers=4, hidden=1024, intermediate=4096, vocab=32000, kv_width=256)


def test_ppo_generate_holds_the_kv_cache_and_train_keeps_adams_states_divided_under_zero() -> None:
    from rlhf_exp.plan.ppo_costs import ADAM_BYTES, ppo_costs

    shapes = {role: WIDE for role in ("actor", "ref", "critic", "reward")}
    settings = compose_settings("gpus=4", "zero=stage2", "train.micro_batch_size=2", "ppo.prompt_len=8", "ppo.answer_len=8")
    parts = {part: (t, after) for part, t, after in ppo_costs(settings, shapes, 4, on_gpu=False)}
    tokens = 2 * 16
    kv_cache = 2 * 4 * tokens * 256 * 2  # K and V, layers x tokens x kv width, bf16
    assert parts["generate"][0].host_private >= kv_cache and parts["generate"][1] == RankMemory()
    assert parts["train_actor"][1].host_private == ADAM_BYTES * T / 4  # ZeRO-2: m and v partitioned over 4 ranks
    offload = compose_settings("gpus=4", "zero=stage2_offload")
    t, after = {p: (t, a) for p, t, a in ppo_costs(offload, shapes, 4, on_gpu=True)}["train_actor"]
    assert after.gpu == 0 and after.host_private == ADAM_BYTES * T / 4  # offload keeps Adam on the host
    longer = compose_settings("gpus=4", "zero=stage2", "train.micro_batch_size=2", "ppo.prompt_len=64", "ppo.answer_len=64")
    longer_step = {p: t for p, t, _ in ppo_costs(longer, shapes, 4, on_gpu=False)}["train_actor"]
    assert longer_step.host_private > parts["train_actor"][0].host_private  # activations and logits grow with tokens


@pytest.mark.parametrize("zero", ["stage1", "stage2"])
def test_zero2s_step_keeps_its_gradient_partition_zero1s_the_whole_gradients_beside_two_buckets(zero: str) -> None:
    from rlhf_exp.plan.ppo_costs import ADAM_BYTES, FP32, IPG_BUFFERS, ppo_costs

    shapes = {role: WIDE for role in ("actor", "ref", "critic", "reward")}

    def step_gpu(ranks: int) -> float:
        settings = compose_settings(f"gpus={ranks}", f"zero={zero}")
        return {p: t for p, t, _ in ppo_costs(settings, shapes, ranks, on_gpu=True)}["train_actor"].gpu

    e = 2  # fp16
    divided = (e + FP32 + ADAM_BYTES) * T if zero == "stage2" else ADAM_BYTES * T  # ZeRO-1: only Adam's m and v
    assert step_gpu(1) - step_gpu(8) == pytest.approx(divided * (1 - 1 / 8))
    assert step_gpu(8) > IPG_BUFFERS * REDUCE_BUCKET * e  # the buckets, whatever the trainable count


def test_zero3s_training_step_at_several_ranks_holds_every_gathered_linear_weight_until_the_backward() -> None:
    """F.linear keeps a view of each gathered weight for the backward (ppo_costs.gathered_linear_weights): under ZeRO-3
    at N > 1 the backward's peak holds the role's linear weights whole, apart from the step's gradients and Adam."""
    from rlhf_exp.plan.ppo_costs import gathered_linear_weights, ppo_costs

    shapes = {role: WIDE for role in ("actor", "ref", "critic", "reward")}
    linear = gathered_linear_weights(WIDE)
    assert linear == P - WIDE.vocab * WIDE.hidden  # all but the input embedding

    def train_actor(ranks: int) -> float:
        settings = compose_settings(f"gpus={ranks}", "zero=stage3", "loader=zero3_init")
        return {p: t for p, t, _ in ppo_costs(settings, shapes, ranks, on_gpu=True)}["train_actor"].gpu

    assert train_actor(8) > 2 * linear  # e bytes each: the whole model's linear layers, not an eighth
    assert train_actor(1) < 2 * linear  # one rank gathers no copy: its partition is the weight


def test_zero3s_forwards_at_several_ranks_hold_their_largest_weight_gathered_twice_and_a_prefetch_bucket() -> None:
    from rlhf_exp.config.deepspeed import STAGE3_BUCKET
    from rlhf_exp.plan.ppo_costs import ppo_costs

    shapes = {role: WIDE for role in ("actor", "ref", "critic", "reward")}

    def generate(ranks: int, zero: str) -> float:
        settings = compose_settings(f"gpus={ranks}", f"zero={zero}")
        return {p: t for p, t, _ in ppo_costs(settings, shapes, ranks, on_gpu=True)}["generate"].gpu

    gathers = 2 * (2 * WIDE.vocab * WIDE.hidden + STAGE3_BUCKET)  # fp16: the LM head's all-gather and weight, a bucket
    assert generate(8, "stage3") - generate(8, "stage2") == pytest.approx(gathers)
    assert generate(1, "stage3") == generate(1, "stage2")  # one rank gathers nothing


def test_zero3_initialize_partitions_the_adapters_a_partitioned_load_added_whole() -> None:
    settings = compose_settings("gpus=8", "zero=stage3", "loader=zero3_init", "ppo.steps=0")

    def actor(adapters: int):
        shapes = {role: replace(WIDE, params=P + adapters, loaded_params=P) for role in SHAPES}
        plan = make_plan(settings, "zero3_init", shapes, on("cuda", settings), BASE)
        return stage(plan, "actor.load").gpu_rank_gib, stage(plan, "actor.init").gpu_rank_gib

    adapters = 300_000_000
    (_, init0), (load, init) = actor(0), actor(adapters)
    assert load == pytest.approx(gib(2 * P / 8 + 2 * adapters), abs=1e-3)  # LoRA comes whole onto each rank's partition
    assert init - init0 == pytest.approx(gib(2 * adapters / 8), abs=1e-3)  # and leaves it partitioned


def test_zero3_with_memory_efficient_linear_on_holds_no_gathered_weight_for_the_backward(tmp_path) -> None:
    """DeepSpeed's own linear function keeps the parameter, whose data ZeRO-3 frees, not the gathered weight."""
    import json

    from rlhf_exp.plan.ppo_costs import gathered_linear_weights, ppo_costs

    config = tmp_path / "actor.json"
    config.write_text(json.dumps({"zero_optimization": {"stage": 3, "memory_efficient_linear": True}}))
    settings = compose_settings("gpus=8", "zero=stage3", "loader=zero3_init", f"zero.actor.config_file={config}")
    shapes = {role: WIDE for role in ("actor", "ref", "critic", "reward")}
    step = {p: t for p, t, _ in ppo_costs(settings, shapes, 8, on_gpu=True)}["train_actor"].gpu
    assert step < 2 * gathered_linear_weights(WIDE)


def test_train_memory_efficient_linear_sets_deepspeeds_key_for_the_train_roles_and_the_plan_drops_the_held_weights() -> None:
    """train.memory_efficient_linear=true: the train roles' DeepSpeed config has it on (DeepSpeed-Chat's off stays the
    default), and the 8-rank ZeRO-3 training step no longer holds the gathered linear weights."""
    from rlhf_exp.config.deepspeed import role_ds_config
    from rlhf_exp.plan.ppo_costs import gathered_linear_weights, ppo_costs

    job = ("gpus=8", "zero=stage3", "loader=zero3_init")
    chat, lean = compose_settings(*job), compose_settings(*job, "train.memory_efficient_linear=true")
    for settings, on in ((chat, False), (lean, True)):
        for role, expected in (("actor", on), ("critic", on), ("ref", False), ("reward", False)):
            assert role_ds_config(settings, role, 8)["zero_optimization"]["memory_efficient_linear"] is expected
    shapes = {role: WIDE for role in ("actor", "ref", "critic", "reward")}
    held, freed = (
        {p: t for p, t, _ in ppo_costs(settings, shapes, 8, on_gpu=True)}["train_actor"].gpu for settings in (chat, lean)
    )
    # the backward's peak held the gathered weights (2 bytes each) on top of what the step itself peaks at
    assert held - freed > gathered_linear_weights(WIDE)


def test_a_plan_with_ppo_steps_ends_with_the_first_steps_parts() -> None:
    settings = compose_settings("gpus=1")
    shapes = {role: WIDE for role in ("actor", "ref", "critic", "reward")}
    stages = [st.stage for st in make_plan(settings, "direct", shapes, on("cuda", settings), BASE).stages]
    assert stages[-4:] == ["ppo1.generate", "ppo1.score", "ppo1.train_actor", "ppo1.train_critic"]
    none = compose_settings("gpus=1", "ppo.steps=0")
    assert not any(st.stage.startswith("ppo") for st in make_plan(none, "direct", shapes, on("cuda", none), BASE).stages)


@pytest.mark.parametrize("ranks", [1, 8])
def test_zero3_init_maps_its_share_of_one_weight_file_at_a_time(ranks: int) -> None:
    """fast_read maps one shard at a time and touches the rows of its share: the largest shard / N in RSS as file
    pages (the 13B's 2 GiB shards: RssFile rose 1.96 GiB at gpus=1 and 0.27 at 8 ranks on the H200), not C / N."""
    sharded = RoleShape(P, T, C, LARGEST, largest_file_bytes=C // 4)
    ctx = LoadContext(sharded, 2, False, ranks, True, 0, staging_bytes=64 << 20)
    transient, held = load_costs.zero3_init(ctx)
    assert transient.host_mapped == pytest.approx(C / 4 / ranks)
    assert held.host_mapped == 0 and held.gpu == pytest.approx(2 * P / ranks)
    one_file = LoadContext(RoleShape(P, T, C, LARGEST), 2, False, ranks, True, 0, staging_bytes=64 << 20)
    assert load_costs.zero3_init(one_file)[0].host_mapped == pytest.approx(C / ranks)  # unsharded: the whole file


def test_zero3_driver_terms_come_with_nccl_not_with_ranks_sharing_a_gpu() -> None:
    """A GPU rank of its own (NCCL) leaves host memory outside its RSS while zero.Init partitions and from its first
    ZeRO-3 init on; ranks sharing one GPU (gloo) showed none of it (plan-vs-measured-2026-12-06)."""
    from rlhf_exp.plan.formulas import ZERO3_DRIVER_HOST, ZERO3_INIT_HOST

    own = compose_settings("gpus=8", "zero=stage3", "loader=zero3_init")
    shared = compose_settings("gpus=8", "zero=stage3", "loader=zero3_init", "share_gpus=true")
    one_gpu = local_target(shared, "cuda", 1000 * GIB, 1000 * GIB, 80 * GIB, 1)
    assert one_gpu.ranks_per_gpu == 8
    nccl = make_plan(own, "zero3_init", SHAPES, on("cuda", own), BASE)
    gloo = make_plan(shared, "zero3_init", SHAPES, one_gpu, BASE)
    for name, outside in (
        ("actor.load", load_costs.ZERO3_INIT_LOAD_DRIVER_HOST),
        ("actor.init", ZERO3_DRIVER_HOST + ZERO3_INIT_HOST),  # the actor trains: its init partitions optimizer state
        ("ref.init", ZERO3_DRIVER_HOST),
    ):
        assert stage(nccl, name).node_peak_gib == pytest.approx(stage(gloo, name).node_peak_gib + 8 * outside / GIB, abs=1e-3)
    assert stage(nccl, "actor.load").gpu_rank_gib == stage(gloo, "actor.load").gpu_rank_gib  # the GPU side is the same


def test_ranks_sharing_a_gpu_keep_zero3s_gathers_and_gradient_reduces_in_a_pinned_pool_that_only_grows() -> None:
    """gloo stages CUDA tensors through torch's pinned host pool (gloo_staging.py): the PPO parts of ranks sharing a GPU
    hold it on top of what ranks of their own GPU (NCCL) hold, growing with each role gathered and trained."""
    from rlhf_exp.plan.gloo_staging import gather_classes, pow2

    own = compose_settings("gpus=8", "zero=stage3", "loader=zero3_init", "ppo.steps=1")
    shared = compose_settings("gpus=8", "zero=stage3", "loader=zero3_init", "ppo.steps=1", "share_gpus=true")
    one_gpu = local_target(shared, "cuda", 1000 * GIB, 1000 * GIB, 80 * GIB, 1)
    widths = {"layers": 24, "hidden": 2048, "intermediate": 5504, "vocab": 32000, "kv_width": 2048}
    shapes = {role: replace(shape, **widths) for role, shape in SHAPES.items()}
    nccl = make_plan(own, "zero3_init", shapes, on("cuda", own), BASE)
    gloo = make_plan(shared, "zero3_init", shapes, one_gpu, BASE)
    extra = [
        stage(gloo, f"ppo1.{part}").rank_rise_gib - stage(nccl, f"ppo1.{part}").rank_rise_gib
        for part in ("generate", "score", "train_actor", "train_critic")
    ]
    grown = [b - a for a, b in zip(extra, extra[1:], strict=False)]
    assert extra[0] > 0 and min(grown) > -1e-9  # held from generate on, never given back
    actor = shapes["actor"]
    # one gather pins its input and N output chunks, each rounded up to a power of two
    assert sum(gather_classes(actor, 0, 8, 2).values()) % 9 == 0
    assert pow2(3 * 2**20 + 1) == 4 * 2**20 and pow2(4 * 2**20) == 4 * 2**20
    # the actor's step adds one block of its LoRA gradients' class (20 MB: 32 MiB, a class no gather used)
    assert extra[2] - extra[1] == pytest.approx(pow2(actor.trainable * 2) / GIB, abs=1e-3)


def test_ranks_sharing_a_gpu_pin_zero2s_gradient_bucket_and_the_gather_of_its_updated_partitions() -> None:
    """ZeRO-2 under gloo (gloo_staging.py): each trained role's step pins one block of its gradients' bucket and N+1
    blocks of one partition (the all-gather of the updated weights); ranks of their own GPU pin none of it."""
    from rlhf_exp.plan.gloo_staging import pow2

    ranks = 4
    own = compose_settings(f"gpus={ranks}", "zero=stage2", "loader=direct", "ppo.steps=1")
    shared = compose_settings(f"gpus={ranks}", "zero=stage2", "loader=direct", "ppo.steps=1", "share_gpus=true")
    one_gpu = local_target(shared, "cuda", 1000 * GIB, 1000 * GIB, 80 * GIB, 1)
    actor = replace(SHAPES["actor"], trainable=120_000_000)  # llama-1.3b with LoRA r128: 229 MiB of fp16 gradients
    shapes = {**SHAPES, "actor": actor}
    nccl = make_plan(own, "direct", shapes, on("cuda", own), BASE)
    gloo = make_plan(shared, "direct", shapes, one_gpu, BASE)

    def extra(part: str) -> float:
        return stage(gloo, f"ppo1.{part}").rank_rise_gib - stage(nccl, f"ppo1.{part}").rank_rise_gib

    assert extra("score") == pytest.approx(extra("generate"), abs=1e-9)  # ZeRO-2 gathers nothing to generate or score
    bucket, partition = pow2(actor.trainable * 2), pow2(actor.trainable * 2 / ranks)
    assert (bucket, partition) == (256 * 2**20, 64 * 2**20)
    step = extra("train_actor") - extra("generate")
    assert step == pytest.approx((bucket + (ranks + 1) * partition) / GIB, abs=1e-3)
    assert extra("train_critic") >= extra("train_actor")  # the pool keeps the actor's blocks


def test_a_replicated_engines_broadcast_pins_a_block_per_parameter_size_until_a_fast_read_load_empties_the_pool() -> None:
    """deepspeed.initialize broadcasts a ZeRO-0/1/2 model from rank 0; under gloo each parameter size's class keeps one
    pinned block (gloo_staging.broadcast_classes: llama-1.3b with LoRA r128, 0.167 GiB measured, 0.1665 by the rule).
    direct's fast_read load hands the cached blocks back as it ends; ref's copy on the GPU does not."""
    from rlhf_exp.plan.formulas import CUDA_RUNTIME_HOST, GLOO_RUNTIME_HOST
    from rlhf_exp.plan.gloo_staging import broadcast_classes, pool_bytes

    ranks = 4
    own = compose_settings(f"gpus={ranks}", "zero=stage2", "loader=direct", "lora=r128")
    shared = compose_settings(f"gpus={ranks}", "zero=stage2", "loader=direct", "lora=r128", "share_gpus=true")
    one_gpu = local_target(shared, "cuda", 1000 * GIB, 1000 * GIB, 80 * GIB, 1)
    actor = {"hidden": 2048, "intermediate": 5504, "vocab": 32000, "kv_width": 2048}
    critic = {"hidden": 1024, "intermediate": 2816, "vocab": 32000, "kv_width": 1024}
    shapes = {role: replace(shape, **(actor if role in ("actor", "ref") else critic)) for role, shape in SHAPES.items()}
    assert pool_bytes(broadcast_classes(shapes["actor"], 128, 2)) / GIB == pytest.approx(0.1665, abs=1e-4)
    assert pool_bytes(broadcast_classes(shapes["critic"], 128, 2)) / GIB == pytest.approx(0.0735, abs=1e-4)
    nccl = make_plan(own, "direct", shapes, on("cuda", own), BASE)
    gloo = make_plan(shared, "direct", shapes, one_gpu, BASE)

    def extra(name: str) -> float:
        return stage(gloo, name).rank_rise_gib - stage(nccl, name).rank_rise_gib

    runtime = (GLOO_RUNTIME_HOST - CUDA_RUNTIME_HOST) / GIB
    actor_pool = pool_bytes(broadcast_classes(shapes["actor"], 128, 2)) / GIB
    assert extra("actor.init") == pytest.approx(runtime + actor_pool, abs=1e-3)
    assert extra("ref.init") == pytest.approx(extra("actor.init"), abs=1e-3)  # the ref's sizes: the actor's blocks serve
    assert extra("critic.load") == pytest.approx(extra("actor.init"), abs=1e-3)  # held while the load runs, then freed
    critic_pool = pool_bytes(broadcast_classes(shapes["critic"], 128, 2)) / GIB  # after the critic's load emptied it
    assert extra("critic.init") == pytest.approx(runtime + critic_pool, abs=1e-3)


def test_cpu_ranks_under_zero3_gather_through_a_copy_and_keep_the_heaps_high_water_for_later_parts() -> None:
    """On CPU ranks gloo gathers into a temporary and glibc's arenas keep what the gathers freed: generate's host rise
    is twice the gathers and stays; a later part rises only by what it needs beyond what the arenas kept."""
    from rlhf_exp.plan.ppo_costs import CPU_GATHER_COPIES, ppo_costs, zero3_gathers

    settings = compose_settings("gpus=4", "zero=stage3", "loader=zero3_init", "ppo.steps=1")
    widths = {"layers": 8, "hidden": 768, "intermediate": 2048, "vocab": 32000, "kv_width": 768}
    shapes = {role: replace(shape, **widths) for role, shape in SHAPES.items()}
    parts = {p: (t, after) for p, t, after in ppo_costs(settings, shapes, 4, on_gpu=False)}
    on_card = {p: t for p, t, _ in ppo_costs(settings, shapes, 4, on_gpu=True)}
    gathers = zero3_gathers(settings, "actor", shapes["actor"], 2)
    assert CPU_GATHER_COPIES == 2  # generate's KV cache and prefill as on a GPU, the gathers twice
    assert parts["generate"][0].host_private - on_card["generate"].gpu == pytest.approx(gathers)
    plan = make_plan(settings, "zero3_init", shapes, on("cpu", settings), BASE)
    rise = {p: stage(plan, f"ppo1.{p}").rank_rise_gib for p in ("generate", "score", "train_actor", "train_critic")}
    t = {p: parts[p][0].host_private for p in parts}
    # each part rises by what it needs beyond the heap the parts before it left, not by its whole transient
    assert rise["score"] - rise["generate"] == pytest.approx(gib(max(0.0, t["score"] - t["generate"])), abs=2e-3)
    kept = max(t["generate"], t["score"])
    assert t["train_actor"] > kept
    assert rise["train_actor"] - rise["score"] == pytest.approx(gib(t["train_actor"] - kept), abs=2e-3)
