"""Every scenario, declared once: its configs on the GPU machine (`full`) and its smallest CPU rehearsal (`dry`).

Placeholders in a run's overrides: {model} (the pair under test), {small} (a smaller pair), {device}, {ranks}
(ranks sharing the GPU in the host-memory studies), {timeout} (job_timeout_s), {tokens} (prompt and answer length
of the long PPO step), {shared_tokens} (prompt and answer length of the PPO step of ranks sharing the GPU).
"""

from __future__ import annotations

from bench.scenario import Run, Scenario
from bench.tools import (
    digests,
    first_run,
    fit_check,
    gpu_peaks,
    host_figures,
    host_speed,
    naive_init,
    plan_check,
    read_pieces,
    stages,
    time_to_engine,
    verdicts,
    watchdog,
)

GPU = {"device": "cuda", "timeout": "900"}
CPU = {"device": "cpu", "timeout": "300", "model": "tiny", "small": "tiny", "ranks": "2", "tokens": "8"}
ZERO2 = ("gpus=1", "lora=r128", "device={device}", "job_timeout_s={timeout}")
SHARED = ("gpus={ranks}", "share_gpus=true", "model={small}", "lora=r128", "device={device}", "job_timeout_s={timeout}")
LEAN_LINEAR = "train.memory_efficient_linear=true"  # DeepSpeed's ZeRO-3 linear: no gathered weight held for the backward
SHARED_PPO = ("ppo.steps=1", "ppo.prompt_len={shared_tokens}", "ppo.answer_len={shared_tokens}")
EVERY_LOADER = ("naive", "staggered", "low_mem", "rank0_broadcast", "direct")
# the seed's PPO workload (DeepSpeedExamples 529): micro batch {batch}, prompt and answer {tokens} tokens each
SEED_PPO = (
    *ZERO2,
    "model={model}",
    "ppo.steps=1",
    "train.micro_batch_size={batch}",
    "ppo.prompt_len={tokens}",
    "ppo.answer_len={tokens}",
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            name="seed",
            summary="the 2023 seed job (DeepSpeedExamples 529) on one GPU: 13B actor + 7B critic, LoRA r128, ZeRO-2, naive, "
            "one PPO step; every stage's time, rank VmHWM, GPU, the job's wall time and a profile of the engine build",
            full={**GPU, "model": "llama-13b"},
            dry=CPU,
            runs=(
                Run(
                    "naive",
                    ("naive", "staggered"),  # at one rank staggered's wait is empty: the same build, timed apart
                    (*ZERO2, "model={model}", "zero=stage2", "ppo.steps=1", "profile=true"),
                ),
            ),
            table=stages.table,
        ),
        Scenario(
            name="time-to-engine",
            summary="seconds from nothing to the four engines per loader (load and init stages), beside this machine's "
            "disk, page-cache and host-to-GPU limits for the same bytes; --ship sets loader=auto's order",
            full={**GPU, "model": "llama-7b"},
            dry=CPU,
            runs=(
                Run("zero2", ("direct", "rank0_broadcast", "low_mem", "naive", "staggered"), (*ZERO2, "model={model}")),
                Run("zero3", ("zero3_init", "direct"), (*ZERO2, "model={model}", "zero=stage3")),
            ),
            prepare=time_to_engine.measure_limits,
            table=time_to_engine.table,
        ),
        Scenario(
            name="plan-vs-measured",
            summary="every stage's planned rank, node and GPU figures against the measured ones: gpus=1 with every "
            "loader (ZeRO-2, ZeRO-3), the PPO step at 512+512 tokens, and 8 ranks sharing the GPU",
            # shared_tokens: the config's default; at 13B, ZeRO-3 gathers every layer through gloo per token (more than
            # 329 s for 16 + 16 tokens at 8 ranks, plan-vs-measured-2026-12-06-4): --size shared_tokens=4 fits a lease
            full={**GPU, "model": "llama-7b", "small": "llama-1.3b", "ranks": "8", "tokens": "512", "shared_tokens": "16"},
            dry={**CPU, "shared_tokens": "8"},
            runs=(
                Run("zero2", ("naive", "direct", "low_mem", "rank0_broadcast"), (*ZERO2, "model={model}", "ppo.steps=1")),
                Run("zero3", ("zero3_init", "direct"), (*ZERO2, "model={model}", "zero=stage3", "ppo.steps=1")),
                Run(
                    "ppo-long",
                    ("direct",),
                    (
                        *ZERO2,
                        "model={model}",
                        "ppo.steps=1",
                        "ppo.prompt_len={tokens}",
                        "ppo.answer_len={tokens}",
                        "train.micro_batch_size=4",
                    ),
                ),  # fmt: skip
                # every loader, each until it fails where the plan says it does not fit (at 7B and 13B, ZeRO-2's eight
                # replicas overflow the card, naive's fp32 reads the host: the watchdog stops it)
                Run("shared-zero2", EVERY_LOADER, (*SHARED, *SHARED_PPO, "plan.fit_check=false")),
                Run("shared-zero3", ("zero3_init",), (*SHARED, "zero=stage3", *SHARED_PPO)),
                # the engine alone: at 13B (--size small=llama-13b) eight ranks' training steps do not fit one GPU,
                # each holding the actor's gathered linear weights for the backward (ppo_costs.gathered_linear_weights)
                Run("shared-zero3-engine", ("zero3_init",), (*SHARED, "zero=stage3")),
                # and with DeepSpeed's memory-efficient linear, which holds none: the 13B pair's step fits one H200
                Run("shared-zero3-lean", ("zero3_init",), (*SHARED, "zero=stage3", *SHARED_PPO, LEAN_LINEAR)),
            ),
            table=plan_check.table,
        ),
        Scenario(
            name="loaders",
            summary="the host-memory study: 8 ranks sharing the GPU (the host of an 8-GPU node) load with each loader; "
            "node rise while every rank loads the actor, against the checkpoint",
            full={**GPU, "small": "llama-1.3b", "ranks": "8"},
            dry=CPU,
            runs=(Run("zero2", EVERY_LOADER, SHARED), Run("zero3", ("zero3_init",), (*SHARED, "zero=stage3"))),
            table=host_figures.table,
        ),
        Scenario(
            name="digests",
            summary="engine weights bit-identical across loaders (sha256 of every weight after the engine and after a "
            "PPO step): naive, direct and rank0_broadcast, ref/reward copied on the GPU and read again; ZeRO-3: naive and "
            "zero3_init reading its share or through from_pretrained",
            full={**GPU, "small": "llama-1.3b", "ranks": "2"},
            dry=CPU,
            runs=(
                Run(
                    "shared",
                    ("naive", "direct", "direct:reread", "rank0_broadcast", "rank0_broadcast:reread"),
                    (*SHARED, "verify_weights=true", "ppo.steps=1"),
                    dry_loaders=("naive", "direct"),
                ),
                Run(
                    "shared-zero3",
                    ("naive", "zero3_init", "zero3_init:library"),
                    (*SHARED, "zero=stage3", "verify_weights=true", "ppo.steps=1"),
                    dry_loaders=("naive", "zero3_init"),  # zero3_init:library against it: zero3-profile's dry run
                ),
            ),
            table=digests.table,
        ),
        Scenario(
            name="watchdog",
            summary="the watchdog against the kernel's OOM killer: 10 consecutive jobs of 8 ranks sharing the GPU, naive, "
            "the seed pair, fit check off; each must be stopped by the watchdog, the node below MemTotal - 2 GiB",
            full={**GPU, "model": "llama-13b", "ranks": "8", "fraction": "0.95"},
            dry={**CPU, "fraction": "0.01"},  # the rehearsal trips at once: the plumbing, not the race
            runs=(
                Run(
                    "shared-naive",
                    ("naive",),
                    (
                        "gpus={ranks}",
                        "share_gpus=true",
                        "model={model}",
                        "lora=r128",
                        "device={device}",
                        "job_timeout_s={timeout}",
                        "watcher.max_node_fraction={fraction}",
                    ),
                ),  # fmt: skip
            ),
            prepare=watchdog.what_the_kernel_offers,
            table=watchdog.table,
            repeat=10,
            compares=False,  # ten runs of an older tree's watchdog would not fit a lease beside them
        ),
        Scenario(
            name="zero3-profile",
            summary="where zero3_init's load time goes at 8 ranks sharing the GPU (ZeRO-3, the seed pair): from_pretrained "
            "(zero3_init:library, before) and each rank reading its share (after; run first): stages, digests, rank 0's cProfile",
            full={**GPU, "model": "llama-13b", "ranks": "8"},
            dry=CPU,
            runs=(
                Run(
                    "shared-zero3",
                    ("zero3_init", "zero3_init:library"),  # after first: a lease cut short keeps the new figure
                    (
                        "gpus={ranks}",
                        "share_gpus=true",
                        "model={model}",
                        "lora=r128",
                        "device={device}",
                        "job_timeout_s={timeout}",
                        "zero=stage3",
                        "profile=true",
                        "verify_weights=true",
                    ),
                    dry_loaders=("zero3_init", "zero3_init:library"),
                ),  # fmt: skip
            ),
            table=lambda ctx: stages.table(ctx) + "\n" + digests.table(ctx),  # the time, and the weights the same
        ),
        Scenario(
            name="fit-check",
            summary="the fit check proven by running: six configurations (gpus=1 and 8 ranks sharing the GPU, ZeRO-2 and "
            "ZeRO-3, three loaders, the seed's PPO workload) each run under machine.emulate capped at its plan (must "
            "complete), then 5 % below what that run needed (must fail at the stage the plan names)",
            full={**GPU, "model": "llama-13b", "small": "llama-1.3b", "ranks": "8", "tokens": "512", "batch": "4"},
            dry={**CPU, "batch": "1"},  # the plumbing: on a tiny CPU job the node's noise is larger than 5 %
            runs=(
                Run("seed-naive", ("naive",), SEED_PPO),
                Run("seed-direct", ("direct",), SEED_PPO),
                # ZeRO-3 generates token by token with every layer gathered: 492 s for 512 tokens on the H200
                # (bench/results/fit-check-2026-12-05), so this one takes the default PPO step (16 + 16 tokens)
                Run("seed-zero3", ("zero3_init",), (*ZERO2, "model={model}", "zero=stage3", "ppo.steps=1")),
                Run("shared-zero2", ("direct",), (*SHARED, "ppo.steps=1")),
                Run("shared-zero3", ("zero3_init",), (*SHARED, "zero=stage3", "ppo.steps=1")),
                Run("shared-naive", ("naive",), (*SHARED, "ppo.steps=1")),
            ),
            run_jobs=fit_check.run_jobs,
            table=fit_check.table,
            compares=False,  # each configuration runs three times already
        ),
        Scenario(
            name="first-run",
            summary="a preset's first run (its checkpoints generated in the job process, just before the baseline) "
            "against its second (on disk): node per stage, with and without the per-CPU free lists draining under the first",
            full={**GPU, "model": "llama-13b"},
            dry=CPU,
            runs=(Run("actor", ("naive",), ("model={model}", "gpus=1", "roles=[actor]", "device={device}")),),
            run_jobs=first_run.run_jobs,
            table=first_run.table,
            pregenerate=False,  # each round's first run generates its pair in a fresh cache dir
        ),
        Scenario(
            name="seed-a100",
            summary="the 2023 failure reproduced: the seed job run as if on an A100-80G node (machine.emulate), with "
            "DeepSpeed 0.9's timing of the ZeRO-2 Adam states and with today's; where each ended beside where its plan said",
            full={**GPU, "model": "llama-13b"},
            dry=CPU,
            runs=tuple(
                Run(
                    name,
                    ("naive",),
                    (
                        *ZERO2,
                        "model={model}",
                        "zero=stage2",
                        "ppo.steps=1",
                        "machine=a100-80g-8x",
                        "machine.emulate=true",
                        f"train.optimizer_states_at_init={at_init}",
                    ),
                )  # fmt: skip
                for name, at_init in (("deepspeed-0.9", "true"), ("today", "false"))
            ),
            table=verdicts.table,
            compares=False,
        ),
        Scenario(
            name="gpu-peaks",
            summary="what made each stage's GPU peak (torch's allocation history replayed, rank 0): the PPO step at "
            "4 x 1024 tokens at gpus=1, and 8 ranks sharing the GPU under ZeRO-3, beside the plan's figure",
            full={**GPU, "small": "llama-1.3b", "ranks": "8", "tokens": "512"},
            dry=CPU,
            runs=(
                Run(
                    "ppo-long",
                    ("direct",),
                    (
                        *ZERO2,
                        "model={small}",
                        "ppo.steps=1",
                        "ppo.prompt_len={tokens}",
                        "ppo.answer_len={tokens}",
                        "train.micro_batch_size=4",
                        "profile_gpu_memory=true",
                    ),
                ),  # fmt: skip
                Run("shared-zero3", ("zero3_init",), (*SHARED, "zero=stage3", "ppo.steps=1", "profile_gpu_memory=true")),
            ),
            table=gpu_peaks.table,
            compares=False,
        ),
        Scenario(
            name="naive-init",
            summary="naive's fp32 model zero-filled against randomly initialised (as from_config would): load time and "
            "VmHWM of the llama-1.3b actor, one process each",
            full={"small": "llama-1.3b"},
            dry={"small": "tiny"},
            table=naive_init.table,
        ),
        Scenario(
            name="host-speed",
            summary="this host's memory speeds as naive's load and DeepSpeed's cast meet them: fresh pages first touched "
            "(again at once, and after an idle spell: a VM's free page reporting), private reads, host to GPU; torch's "
            "allocator as is and with transparent huge pages, 1 thread and all cores",
            full={"gib": "4", "idle_s": "10"},
            dry={"gib": "0.25", "idle_s": "1"},
            table=host_speed.table,
        ),
        Scenario(
            name="read-pieces",
            summary="where one fast_read of the llama-7b actor goes on a GPU: pinned staging buffers, GPU allocation, the "
            "read, and DeepSpeed's one-time compiler import beside it",
            full={"model": "llama-7b"},
            dry={"model": "tiny"},
            table=read_pieces.table,
        ),
    )
}
