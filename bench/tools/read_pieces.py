"""Where fast_read's time goes on a GPU, piece by piece, on one checkpoint already in the page cache.

    python -m bench run read-pieces                        # the llama-7b actor (the scenario)
    python -m bench.tools.read_pieces --checkpoint DIR     # any safetensors checkpoint directory

Prints seconds for: page-locked staging buffers (16 threads x 2 x 16 MiB) allocated one by one, in the reading
threads, as one block, and handed back; the checkpoint's tensors allocated on the GPU; read_safetensors with the
caching allocator's segments reused and fresh; and, in fresh processes as a rank runs after its imports (CUDA
context, first read, DeepSpeed's one-time Muon import of torch._dynamo and torch._inductor, which the first
deepspeed.initialize of a ZeRO engine pays): those three in order (serial, as a rank runs them) and with
the import in a thread from the start (early: does overlapping the import with the read pay?), each twice,
interleaved. Writes the figures as JSON with --out. Lease 3 (results/h200-speed-lease3/h200-read-pieces.json): it
does not; the read takes 0.6-0.7 s longer beside the import (the GIL), and the total is no shorter.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from bench.jobs import checkpoint_files
from bench.scenario import Context
from bench.tools.time_to_engine import read_all
from rlhf_exp.checkpoints.fast_read import read_header, read_safetensors, release_pinned_cache
from rlhf_exp.checkpoints.files import weight_files

THREADS, CHUNK = 16, 16 << 20
GPU = torch.cuda.is_available()  # without one (a rehearsal), the reads go to the CPU and the GPU figures are skipped
DEVICE = torch.device("cuda" if GPU else "cpu")
MUON = "deepspeed.runtime.zero.muon.muon_optimizer"


def sync() -> None:
    if GPU:
        torch.cuda.synchronize()


def timed(fn) -> float:
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return round(time.perf_counter() - start, 3)


def pinned(count: int, nbytes: int = CHUNK) -> list[torch.Tensor]:
    return [torch.empty(nbytes, dtype=torch.uint8, pin_memory=True) for _ in range(count)]


def pinned_figures() -> dict[str, float]:
    out: dict[str, float] = {}
    held: list[torch.Tensor] = []
    out["pinned_alloc_serial_s"] = timed(lambda: held.extend(pinned(2 * THREADS)))
    held.clear()
    out["pinned_release_s"] = timed(release_pinned_cache)

    def in_threads() -> None:
        with ThreadPoolExecutor(THREADS) as pool:
            held.extend(b for bufs in pool.map(lambda _: pinned(2), range(THREADS)) for b in bufs)

    out["pinned_alloc_threads_s"] = timed(in_threads)
    held.clear()
    release_pinned_cache()
    out["pinned_alloc_one_block_s"] = timed(lambda: held.extend(pinned(1, 2 * THREADS * CHUNK)))
    held.clear()
    out["pinned_release_one_block_s"] = timed(release_pinned_cache)
    return out


def read_once(files: list[Path]) -> float:
    state: dict[str, torch.Tensor] = {}
    seconds = timed(lambda: state.update(read_safetensors(files, DEVICE, torch.bfloat16, THREADS, CHUNK)))
    state.clear()
    return seconds


def child(files: list[Path], early: bool) -> dict[str, float]:
    """A fresh process, as a rank after its imports: CUDA context, the first read, DeepSpeed's Muon import; in that
    order (serial, today's), or with the import in a thread from the start (early), joined after the read."""
    import deepspeed  # noqa: F401  (imported before, as in a rank)

    def muon() -> None:
        __import__(MUON)

    thread = threading.Thread(target=muon)
    start = time.perf_counter()
    if early:
        thread.start()
    out = {"cuda_init_s": timed(lambda: torch.empty(1, device=DEVICE)), "first_read_s": read_once(files)}
    out["import_or_wait_s"] = timed(thread.join if early else muon)
    out["total_s"] = round(time.perf_counter() - start, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="a safetensors checkpoint directory (default: the actor of model=...)")
    parser.add_argument("--child", choices=["serial", "early"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--rounds", type=int, default=2, help="fresh-process pairs (serial, early), interleaved")
    args, overrides = parser.parse_known_args()
    if args.checkpoint is None:
        files = [f for f in checkpoint_files(overrides) if "causal_lm" in str(f)]
    else:
        files = weight_files(args.checkpoint)
    if args.child:
        print(json.dumps(child(files, args.child == "early")))
        return
    gib = sum(f.stat().st_size for f in files) / (1 << 30)
    figures: dict[str, object] = {"files": [str(f) for f in files], "gib": round(gib, 3)}
    read_all(files)  # into the page cache
    source = ["--checkpoint", str(args.checkpoint)] if args.checkpoint else overrides
    for mode in ["serial", "early"] * args.rounds:  # interleaved: the machine is shared
        run = subprocess.run(
            [sys.executable, "-m", "bench.tools.read_pieces", "--child", mode, *source],
            capture_output=True,
            text=True,
            check=True,
        )
        figures.setdefault(f"fresh_process_{mode}", []).append(json.loads(run.stdout.strip().splitlines()[-1]))  # type: ignore[union-attr]
    if GPU:
        torch.empty(1, device=DEVICE)
        figures |= pinned_figures()
        shapes = [e.shape for f in files for e in read_header(f)]
        held: list[torch.Tensor] = []
        figures["gpu_alloc_s"] = timed(lambda: held.extend(torch.empty(s, dtype=torch.bfloat16, device=DEVICE) for s in shapes))
        held.clear()
        figures["read_cached_segments_s"] = read_once(files)
        torch.cuda.empty_cache()
    figures["read_fresh_segments_s"] = read_once(files)
    text = json.dumps(figures, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


def table(ctx: Context) -> str:
    """The scenario: this module in a process of its own (fresh CUDA state), on the actor of the scenario's model."""
    out = ctx.out / "read_pieces.json"
    rounds = "1" if ctx.dry else "2"
    cmd = [sys.executable, "-m", "bench.tools.read_pieces", "--out", str(out), "--rounds", rounds, f"model={ctx.sizes['model']}"]
    subprocess.run(cmd, check=True)
    figures = json.loads(out.read_text())
    flat = {k: v for k, v in figures.items() if not isinstance(v, list)}
    rows = [{"figure": k, "value": v} for k, v in flat.items()]
    rows += [{"figure": f"{k}[{i}].{f}", "value": v} for k, runs in figures.items() if k.startswith("fresh")
             for i, run in enumerate(runs) for f, v in run.items()]  # fmt: skip
    return "\n".join(["| figure | value |", "|---|---|", *(f"| {r['figure']} | {r['value']} |" for r in rows)]) + "\n"


if __name__ == "__main__":
    main()
