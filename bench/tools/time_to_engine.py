"""Time to engine: every loader's load and init stages beside this machine's limit for the same bytes, one run.

The limits, measured here on the job's own checkpoint files: disk to host (the files evicted from the page cache
with posix_fadvise, then read by 16 threads), page cache to host (read again, cached), and pinned host to GPU
(torch copies of a 1 GiB pinned buffer); page cache to GPU is the smaller of the last two (the copies overlap the
reads). Each job's stage durations come from its result.json. With --ship, the seconds per GiB go to
rlhf_exp/loaders/measured_speed.json: the order loader=auto tries loaders in.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import GIB, REPO
from bench.jobs import checkpoint_files
from bench.scenario import Context, JobResult
from bench.tools.tables import markdown

CHUNK = 16 << 20
SPEED_FILE = REPO / "rlhf_exp" / "loaders" / "measured_speed.json"
TWIN_OF = {"ref": "actor", "reward": "critic"}


def read_all(files: list[Path], threads: int = 16) -> float:
    """Seconds to read every byte of `files` with `threads` parallel preads (no mapping)."""
    jobs = [(f, off) for f in files for off in range(0, f.stat().st_size, CHUNK)]

    def run(index: int) -> None:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        fds = {f: os.open(f, os.O_RDONLY) for f in files}
        try:
            for f, off in jobs[index::threads]:
                os.preadv(fds[f], [view], off)
        finally:
            for fd in fds.values():
                os.close(fd)

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for fut in [pool.submit(run, i) for i in range(threads)]:
            fut.result()
    return time.perf_counter() - start


def evict(files: list[Path]) -> None:
    """Drop the files' clean pages from the page cache (no root needed)."""
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def pinned_to_gpu_gib_s() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    src = torch.empty(GIB, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(GIB, dtype=torch.uint8, device="cuda")
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(5):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    return 5 / (time.perf_counter() - start)


def limits(files: list[Path]) -> dict[str, float | None]:
    nbytes = sum(f.stat().st_size for f in files)
    evict(files)
    disk = nbytes / GIB / read_all(files)
    cache = nbytes / GIB / min(read_all(files) for _ in range(2))
    h2d = pinned_to_gpu_gib_s()
    return {
        "bytes_gib": round(nbytes / GIB, 3),
        "disk_to_host_gib_s": round(disk, 2),
        "page_cache_to_host_gib_s": round(cache, 2),
        "pinned_to_gpu_gib_s": round(h2d, 2) if h2d else None,
        "page_cache_to_gpu_gib_s": round(min(cache, h2d), 2) if h2d else None,
    }


def measure_limits(ctx: Context) -> None:
    files = checkpoint_files([f"model={ctx.sizes['model']}"])
    ctx.facts["limits"] = limits(files)
    print("limits:", json.dumps(ctx.facts["limits"]), flush=True)


def row(job: JobResult, limit: dict) -> dict:
    result = job.result or {}
    stages = {s["stage"]: s for s in result["stages"]}
    roles = [r for r in ("actor", "ref", "critic", "reward") if f"{r}.load" in stages]
    shipped = sum(result["checkpoint_gib"][TWIN_OF.get(r, r)] for r in roles)
    times = {
        f"{r}.{step}": stages[f"{r}.{step}"]["duration_s"] for r in roles for step in ("load", "init") if f"{r}.{step}" in stages
    }
    load_s = sum(v for k, v in times.items() if k.endswith(".load"))
    engine_s = sum(times.values())
    best = limit.get("page_cache_to_gpu_gib_s") or limit.get("page_cache_to_host_gib_s")
    return {
        "run": job.run,
        "loader": job.label,
        "gib": round(shipped, 2),
        **{k: round(v, 2) for k, v in times.items()},
        "load_s": round(load_s, 2),
        "engine_s": round(engine_s, 2),
        "limit_s": round(shipped / best, 2) if best else None,
        "engine_x_limit": round(engine_s / (shipped / best), 2) if best else None,
        "s_per_gib": round(engine_s / shipped, 3),
        "node_peak_gib": result.get("node_peak_gib"),
        "wall_s": result.get("wall_s"),
    }


def table(ctx: Context) -> str:
    limit = ctx.facts.get("limits", {})
    rows = [row(j, limit) for j in ctx.completed()]
    measured = ", ".join(f"{k} {v}" for k, v in limit.items()) or "not measured"
    text = f"limits: {measured}\n\n" + (markdown(rows) if rows else "no job completed\n")
    if ctx.ship and rows and not ctx.dry:
        ship(rows, f"bench/results/{ctx.out.name}", ctx.completed()[0].result["device"], SPEED_FILE)
    return text


def ship(rows: list[dict], source: str, device: str, speed_file: Path) -> None:
    """Merge this run's seconds per GiB (each loader's median over repeats, baselines and variants left out) into the
    shipped file; zero3_init from its ZeRO-3 run, every other loader from a ZeRO-2 run. Another device starts afresh."""
    shipped = json.loads(speed_file.read_text()) if speed_file.exists() else {}
    if shipped.get("device") != device:
        shipped = {}
    speed = shipped.get("seconds_per_gib", {})
    timed: dict[str, list[float]] = {}
    for r in rows:
        if ":" not in r["loader"] and "@" not in r["loader"] and (r["run"] == "zero3") == (r["loader"] == "zero3_init"):
            timed.setdefault(r["loader"], []).append(r["s_per_gib"])
    speed.update({loader: statistics.median(figures) for loader, figures in timed.items()})
    sources = [c for c in shipped.get("commands", []) if c != source] + [source]
    speed_file.write_text(json.dumps({"device": device, "commands": sources, "seconds_per_gib": speed}, indent=1) + "\n")
    print(f"wrote {speed_file}")
