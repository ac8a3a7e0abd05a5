"""The first PPO step's memory, per part, for one rank: (transient above the built engine, what stays after).

b = train.micro_batch_size sequences of s = ppo.prompt_len + ppo.answer_len tokens; per role its layers L, hidden
h, MLP width i, vocabulary V and key/value width kv; e engine-dtype bytes; T trainable parameters; N ranks.
Where a term lands: the GPU on CUDA, private host memory on CPU (the host is the device).

generate      the KV cache 2 L b s kv e, plus the prefill's activations of one layer
score         actor and ref logits b s V e held together, then the fp32 copy and log-softmax of one (2 x 4 b s V)
              (under ZeRO-3 at N > 1 every forward also holds its gathers in flight, e (2 V h + prefetch bucket),
              twice on CPU ranks: gloo's all-gather of CPU tensors goes through a temporary of its output)
train_actor   saved activations L b s (ACT_H h + ACT_I i) e (LoRA's dropout copies included), the logits and their
              fp32 log-softmax and its gradient (e + 3 x 4 bytes per b s V), the gradients of the trainable parameters
              (e T, 4T/N fp32 under ZeRO >= 2, 4T otherwise), ZeRO-1/2's two gradient buckets on a GPU (2 x
              reduce_bucket_size, e bytes; fp32 under ZeRO-1) and Adam's m and v (8T/N under
              ZeRO >= 1), which stay after the step; with train.optimizer_states_at_init (DeepSpeed 0.9's timing)
              ZeRO-1/2's m and v come at the role's init stage instead, with a transient zero fp32 gradient 4T/N;
              under ZeRO-3 at N > 1 the larger of the backward's peak (activations, logits and every linear weight the
              forward gathered, e (P - V h)) and the step's (gradients, fp32 gradients, Adam)
train_critic  the same for the critic, whose head emits one value per token instead of V logits
Constants were fitted on the H200 (bench/results/h200-7b-*, h200-1gpu-plan): see formulas.py's docstring.
"""

from __future__ import annotations

from rlhf_exp.config.deepspeed import REDUCE_BUCKET, role_ds_config
from rlhf_exp.config.deepspeed import STAGE3_BUCKET as PREFETCH_BUCKET
from rlhf_exp.config.roles import TRAIN_ROLES
from rlhf_exp.config.schema import RoleZero, RunSettings, role_stage
from rlhf_exp.config.units import DTYPE_BYTES, GIB
from rlhf_exp.plan.terms import RankMemory, RoleShape

# activation bytes saved per token and layer for backward, in engine-dtype units of h and of i (Llama-style block:
# norms, q/k/v/o inputs, the attention output, gate/up/down inputs and outputs; LoRA dropout copies of inputs)
ACT_H = 10  # fitted on bench/results/h200-7b-ppo-long (llama-7b pair, 4 x 1024 tokens): 76.6 GiB measured at
ACT_I = 2.2  # train_actor, 75.9 planned; short sequences (h200-7b-zero2, 32 tokens) are dominated by the optimizer
# host memory of a GPU rank during the PPO parts (cuBLAS/NCCL host state, generation's bookkeeping), measured on the
# H200 with direct at gpus=1 (h200-7b-zero2: VmHWM rise 0.69 / 0.77 / 1.01 GiB, less CUDA_RUNTIME_HOST)
PPO_HOST_GIB = {"generate": 0.45, "score": 0.5, "train_actor": 0.75, "train_critic": 0.75}
PPO_HOST_PER_TOKEN = 128 << 10  # and more with the batch's tokens: +0.5 GiB at 4 x 1024 tokens (h200-7b-ppo-long)
# gloo's all_gather_into_tensor on CPU tensors gathers into a temporary of the output's size and copies it out: a
# 100 MB bf16 gather at 4 CPU ranks raised VmHWM 97.5 MB above the output (torchrun, 2026-12-06)
CPU_GATHER_COPIES = 2
ADAM_BYTES = 8  # m and v, fp32
IPG_BUFFERS = 2  # config/deepspeed.py sets overlap_comm: a second bucket to reduce one while the other fills
FP32 = 4


def _place(nbytes: float, on_gpu: bool) -> RankMemory:
    return RankMemory(gpu=nbytes) if on_gpu else RankMemory(host_private=nbytes)


def adam_states(shape: RoleShape, stage: int, n: int) -> float:
    """Bytes of Adam's m and v on a rank: fp32, of its partition under ZeRO >= 1."""
    return ADAM_BYTES * shape.trainable / (n if stage >= 1 else 1)


def states_at_init(settings: RunSettings, role: str, shape: RoleShape, n: int) -> float:
    """Adam's states a rank holds from deepspeed.initialize on: DeepSpeed 0.9's timing for ZeRO-1/2
    (train.optimizer_states_at_init, rank/optimizer_states.py); 0 where they come with the first step."""
    stage = role_stage(getattr(settings.zero, role))
    early = settings.train.optimizer_states_at_init and role in TRAIN_ROLES and stage in (1, 2)
    return adam_states(shape, stage, n) if early else 0.0


def _train(
    shape: RoleShape, e: int, zero: RoleZero, n: int, tokens: int, head: int, on_gpu: bool, states_held: bool
) -> tuple[RankMemory, RankMemory]:
    """(transient, held after) of one training step of a role whose head emits `head` values per token; offload keeps
    the fp32 gradients and Adam's states in host memory; `states_held`: Adam's states came with initialize."""
    t, stage = shape.trainable, role_stage(zero)
    fp32_grads = FP32 * t / (n if stage >= 2 else 1)
    adam = 0.0 if states_held else adam_states(shape, stage, n)
    # ZeRO-1/2's gradient buckets for the backward, two with overlap_comm (stage_1_and_2.py setup_buckets), whatever
    # the trainable count: 1.86 GiB of fp16 live at both training peaks of llama-1.3b (bench/results/gpu-peaks-2026-12-06)
    buckets = IPG_BUFFERS * REDUCE_BUCKET * (FP32 if stage == 1 else e) if stage in (1, 2) and on_gpu else 0.0
    # ZeRO-2 keeps only its partition's gradients after each bucket's reduce (stage_1_and_2.py copy_grads_in_partition:
    # grads_in_partition, sized by the rank's params_in_partition); ZeRO-1 keeps the whole model's until the step
    grads = e * t / (n if stage == 2 else 1)
    optimizer = RankMemory(host_private=fp32_grads + adam) if zero.offload else _place(fp32_grads + adam, on_gpu)
    held = RankMemory(host_private=adam) if zero.offload else _place(adam, on_gpu)
    return _place(_forward_saved(shape, e, tokens, head) + grads + buckets, on_gpu).plus(optimizer), held


def _forward_saved(shape: RoleShape, e: int, tokens: int, head: int) -> float:
    """What the training forward keeps for the backward: the saved activations, and the head's output with its fp32
    log-softmax and gradient."""
    activations = shape.layers * tokens * (ACT_H * shape.hidden + ACT_I * shape.intermediate) * e
    return activations + tokens * head * (e + 3 * FP32)


def gathered_linear_weights(shape: RoleShape) -> int:
    """Parameters a ZeRO-3 forward gathers into a linear layer: all but the input embedding (norms are negligible)."""
    return max(0, shape.params - shape.vocab * shape.hidden)


def _backward_holding_gathered(
    settings: RunSettings, role: str, shape: RoleShape, e: int, tokens: int, head: int, on_gpu: bool
) -> RankMemory:
    """The backward's peak of a ZeRO-3 role at N > 1 whose config has memory_efficient_linear off (DeepSpeed-Chat's):
    F.linear keeps a view of each weight it was given for the backward, so every linear weight the training forward
    gathered stays held until its layer's backward, whatever ZeRO-3 releases. llama-1.3b at 8 ranks sharing the H100:
    2.08 GiB of gathered weights live at train_actor's peak (gpu-peaks-2026-12-06); the medium model on 8 CPU ranks:
    0.11 GiB of its 0.13, and none with memory_efficient_linear on (DeepSpeed's LinearFunctionForZeroStage3 keeps the
    parameter, whose data ZeRO-3 frees). At one rank ZeRO-3 gathers no copy."""
    if role_stage(getattr(settings.zero, role)) != 3:
        return RankMemory()
    zero_config = role_ds_config(settings, role, settings.gpus).get("zero_optimization", {})
    if zero_config.get("memory_efficient_linear", True):  # DeepSpeed's default: on
        return RankMemory()
    return _place(_forward_saved(shape, e, tokens, head) + e * gathered_linear_weights(shape), on_gpu)


def zero3_gathers(settings: RunSettings, role: str, shape: RoleShape, e: int) -> float:
    """Bytes a ZeRO-3 role's forward at N > 1 holds in gathers at once: its largest weight (the embedding or the LM
    head, V h) twice, as the all-gather's flat output and the weight made from it, and a prefetch bucket of modules:
    llama-1.3b at 8 ranks sharing the H100, 0.29 GiB above what generate and score held (0.15 + 0.12 + 0.02 GiB at
    _all_gather_dtype, all_gather_into_tensor and _all_gather_sequential, gpu-peaks-2026-12-06)."""
    if role_stage(getattr(settings.zero, role)) != 3:
        return 0.0
    return e * (2 * shape.vocab * shape.hidden + PREFETCH_BUCKET)


def ppo_costs(
    settings: RunSettings, shapes: dict[str, RoleShape], n: int, on_gpu: bool
) -> list[tuple[str, RankMemory, RankMemory]]:
    """(part, transient, held after) of each part of the first PPO step."""
    e = DTYPE_BYTES[settings.dtype]
    b, s = settings.train.micro_batch_size, settings.ppo.prompt_len + settings.ppo.answer_len
    tokens = b * s
    actor, critic = shapes["actor"], shapes["critic"]
    kv_cache = 2 * actor.layers * tokens * actor.kv_width * e
    prefill = b * settings.ppo.prompt_len * (4 * actor.hidden + 2 * actor.intermediate) * e
    score = 2 * tokens * actor.vocab * e + 2 * FP32 * tokens * actor.vocab
    early = {role: states_at_init(settings, role, shapes[role], n) > 0 for role in ("actor", "critic")}
    actor_step, actor_held = _train(actor, e, settings.zero.actor, n, tokens, actor.vocab, on_gpu, early["actor"])
    critic_step, critic_held = _train(critic, e, settings.zero.critic, n, tokens, 1, on_gpu, early["critic"])
    if n > 1:  # ZeRO-3's gathered weights held for the backward, where the role's DeepSpeed config lets F.linear keep them
        actor_step = actor_step.larger(_backward_holding_gathered(settings, "actor", actor, e, tokens, actor.vocab, on_gpu))
        critic_step = critic_step.larger(_backward_holding_gathered(settings, "critic", critic, e, tokens, 1, on_gpu))
    # and the gathers in flight of each ZeRO-3 role running its forward (scoring runs the four one after another)
    copies = 1 if on_gpu else CPU_GATHER_COPIES
    gathers = {role: copies * zero3_gathers(settings, role, shapes[role], e) if n > 1 else 0.0 for role in settings.roles}
    actor_step = actor_step.plus(_place(gathers["actor"], on_gpu))
    critic_step = critic_step.plus(_place(gathers["critic"], on_gpu))
    parts = [
        ("generate", _place(kv_cache + prefill + gathers["actor"], on_gpu), RankMemory()),
        ("score", _place(score + max(gathers.values()), on_gpu), RankMemory()),
        ("train_actor", actor_step, actor_held),
        ("train_critic", critic_step, critic_held),
    ]
    if not on_gpu:
        return parts
    host = [PPO_HOST_GIB[part] * GIB + tokens * PPO_HOST_PER_TOKEN for part, _, _ in parts]
    return [(part, t.plus(RankMemory(host_private=h)), after) for (part, t, after), h in zip(parts, host, strict=True)]
