"""One rank of a job: `python -m rlhf_exp.rank.main <job_dir>`, started by the job's elastic launcher.

Reads the job's spec (rlhf_exp/jobdir.py), joins the process group (gloo on CPU, nccl on GPU), builds the
four-model engine (engine.py) and runs the PPO steps (ppo.py), each stage measured by the recorder.
"""

from __future__ import annotations

import cProfile
import gc
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from rlhf_exp.memory.emulation import join_job_cgroup

join_job_cgroup()  # machine.emulate: before the imports below, so that all this rank holds is charged to the job's cap

import deepspeed  # noqa: E402
import torch  # noqa: E402

from rlhf_exp.config.stages import DIST_INIT  # noqa: E402
from rlhf_exp.config.units import GIB  # noqa: E402
from rlhf_exp.job.interrupt import die_with_parent, exit_on_interrupt  # noqa: E402
from rlhf_exp.jobdir import JobDir  # noqa: E402
from rlhf_exp.loaders.base import LOCAL_RANK_VAR, node_local_rank  # noqa: E402
from rlhf_exp.memory.gpu import cap_allocator, cuda_context  # noqa: E402
from rlhf_exp.plan.formulas import CUDA_CONTEXT_GPU  # noqa: E402
from rlhf_exp.rank.engine import build_engine, record_weight_digests  # noqa: E402
from rlhf_exp.rank.ppo import run_ppo  # noqa: E402
from rlhf_exp.rank.recorder import StageRecorder  # noqa: E402


def rank_device(kind: str, local_rank: int) -> tuple[torch.device, int | None]:
    """This rank's device and its GPU index (ranks share GPUs round-robin when there are fewer GPUs).

    DeepSpeed takes a rank's GPU from LOCAL_RANK, so when ranks share GPUs LOCAL_RANK is set to the
    GPU index and the node-local rank moves to RLHF_EXP_LOCAL_RANK (what the loaders read).
    """
    if kind != "cuda":
        return torch.device("cpu"), None
    index = local_rank % torch.cuda.device_count()
    if index != local_rank:
        os.environ[LOCAL_RANK_VAR] = str(local_rank)
        os.environ["LOCAL_RANK"] = str(index)
    torch.cuda.set_device(index)
    return torch.device("cuda", index), index


def skip_unused_shm_op() -> None:
    """Keep DeepSpeed from JIT-building its CPU shared-memory all-reduce op (about 45 s on 2 cores, on a machine's
    first job) when it joins the process group. The op serves only inference_all_reduce (tensor-parallel
    inference), which the engine never calls; marked unavailable, DeepSpeed uses torch.distributed for every
    collective, as it does wherever the op cannot build. deepspeed.ops caches the probe in one dict so that such
    edits persist (deepspeed/ops/__init__.py)."""
    import deepspeed.ops
    from deepspeed.ops.op_builder.cpu.comm import ShareMemCommBuilder

    deepspeed.ops.__compatible_ops__[ShareMemCommBuilder.NAME] = False


@contextmanager
def profiled(out: Path | None) -> Iterator[None]:
    """cProfile what runs inside into `out` (None: run it unprofiled)."""
    if out is None:
        yield
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        out.parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(out)


def main(path: Path) -> None:
    die_with_parent()
    exit_on_interrupt()
    job_dir = JobDir(path)
    spec = job_dir.read_spec()
    settings = spec.settings
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device, gpu_index = rank_device(spec.device, node_local_rank())
    torch.manual_seed(settings.seed)
    recorder = StageRecorder(job_dir, rank, device, gpu_index, settings.fault, settings.profile_gpu_memory)
    recorder.write("start", host=socket.gethostname(), local_rank=node_local_rank())
    skip_unused_shm_op()
    # The ~400k objects of the imports above live as long as the rank: keep the collector from walking them again.
    # DeepSpeed calls gc.collect() in every BF16_Optimizer (see_memory_usage(force=True)), twice per engine.
    gc.freeze()
    with recorder.stage(DIST_INIT, sync=False) as info:
        deepspeed.init_distributed(dist_backend=spec.backend, timeout=timedelta(seconds=settings.dist_timeout_s), verbose=False)
        if device.type == "cuda":
            context = cuda_context(device)
            if context is not None:
                info.update(cuda_context_gib=round(context / GIB, 3))
            machine = settings.machine
            # the target's card less the context as the plan counts it: cuBLAS and NCCL grow it after dist_init (0.51
            # GiB here, 1.51-1.66 at the seed's out-of-memory on the H200: bench/results/seed-a100-2026-12-05)
            if machine.emulate and machine.gpu_gib:
                cap = cap_allocator(device, int(machine.gpu_gib * GIB), max(context or 0, int(CUDA_CONTEXT_GPU)))
                info.update(gpu_allocator_cap_gib=cap["allocator_cap_gib"])
    with profiled(job_dir.profile_file(rank) if settings.profile else None):
        engines = build_engine(settings, spec.checkpoints, device, world_size, recorder)
    if settings.ppo.steps:
        run_ppo(engines, settings.ppo, settings.train.micro_batch_size, settings.seed, recorder)
        if settings.verify_weights:
            for role, engine in engines.items():
                record_weight_digests(engine, recorder, f"{role}.after_ppo")
    recorder.write("done")
    recorder.close()
    torch.distributed.barrier()  # every rank has written `done` before anyone reads the records
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    # The work is recorded and the process group destroyed: leave without running C++ static destructors,
    # where a comm thread still joinable aborts the process now and then ("terminate called without an
    # active exception", SIGABRT, seen on CPU ranks) and would fail a job that has completed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
