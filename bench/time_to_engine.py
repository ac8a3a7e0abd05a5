"""Time to engine: every loader's load and init stages beside this machine's limit for the same bytes, one run.

    python bench/time_to_engine.py --name h200-7b --device cuda model=llama-7b lora=r128
    python bench/time_to_engine.py --name cpu-tiny --loaders naive,low_mem,direct     # any machine

First the limits, measured here on the job's own checkpoint files: disk to host (the files evicted from the
page cache with posix_fadvise, then read by 16 threads), page cache to host (read again, cached), and pinned
host to GPU (torch copies of a 1 GiB pinned buffer); page cache to GPU is the smaller of the last two (the
copies overlap the reads). Then `python -m rlhf_exp loader=<each>`, one job at a time, with ppo.steps=0 unless
given (PPO stages, when run, are not part of the engine's time) (the product itself):
each job's stage durations come from its result.json. `loader:variant` runs a loader with VARIANTS' overrides in
the same sweep for a before/after (`direct:library`: from_pretrained with device_map, the path before fast_read).

Writes results/<name>/: each job's result.json, time_to_engine.json and time_to_engine.md. With --ship, also
rlhf_exp/loaders/measured_speed.json: seconds per GiB per loader, the order loader=auto tries them in.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
GIB = 1 << 30
CHUNK = 16 << 20
SPEED_FILE = REPO / "rlhf_exp" / "loaders" / "measured_speed.json"
# loader:variant in --loaders: the loader with these overrides, in the same sweep (a before/after)
VARIANTS = {
    "library": ["loader.fast_read=false"],  # direct through from_pretrained(device_map): the path before fast_read
    "reread": ["loader.copy_twin=false"],  # ref/reward read their checkpoint again instead of copying on the GPU
}


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


def checkpoint_files(overrides: list[str]) -> list[Path]:
    """The job's weight files (generated now if missing, so generation is not timed as loading)."""
    from rlhf_exp.checkpoints.files import weight_files
    from rlhf_exp.checkpoints.generate import resolve_checkpoint
    from rlhf_exp.config.compose import compose_config
    from rlhf_exp.config.roles import CHECKPOINT_KIND
    from rlhf_exp.config.schema import validate

    m = validate(compose_config([o for o in overrides if not o.startswith("loader.")])).model  # the default loader's keys
    files = []
    for which, kind in CHECKPOINT_KIND.items():
        spec = getattr(m, which)
        files += weight_files(resolve_checkpoint(spec.preset, spec.path, kind, m.checkpoint_dtype, m.cache_dir))
    return files


def run_jobs(loaders: list[str], overrides: list[str], sweep_dir: Path) -> list[dict]:
    """One job per loader, one after another (so each has the machine to itself), ppo.steps=0."""
    results = []
    for num, name in enumerate(loaders):
        loader, _, variant = name.partition(":")
        extra = VARIANTS[variant] if variant else []
        job_dir = sweep_dir / f"{num}_{loader}{'_' + variant if variant else ''}"
        ppo = [] if any(o.startswith("ppo.steps=") for o in overrides) else ["ppo.steps=0"]  # PPO stages are not timed
        cmd = [sys.executable, "-m", "rlhf_exp", f"loader={loader}", f"hydra.run.dir={job_dir}", *ppo, *overrides, *extra]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        result_file = job_dir / "result.json"
        if result_file.exists():
            results.append({"name": name, **json.loads(result_file.read_text())})
    return results


def row(result: dict, limit: dict) -> dict:
    stages = {s["stage"]: s for s in result["stages"]}
    roles = [r for r in ("actor", "ref", "critic", "reward") if f"{r}.load" in stages]
    shipped = sum(result["checkpoint_gib"][{"ref": "actor", "reward": "critic"}.get(r, r)] for r in roles)
    times = {
        f"{r}.{step}": stages[f"{r}.{step}"]["duration_s"] for r in roles for step in ("load", "init") if f"{r}.{step}" in stages
    }
    load_s = sum(v for k, v in times.items() if k.endswith(".load"))
    engine_s = sum(times.values())
    best = limit.get("page_cache_to_gpu_gib_s") or limit.get("page_cache_to_host_gib_s")
    return {
        "loader": result["name"],
        "status": result["status"],
        "gib": round(shipped, 2),
        **{k: round(v, 2) for k, v in times.items()},
        "load_s": round(load_s, 2),
        "engine_s": round(engine_s, 2),
        "load_gib_s": round(shipped / load_s, 2) if load_s else None,
        "limit_s": round(shipped / best, 2) if best else None,
        "files_once_limit_s": round(limit["bytes_gib"] / best, 2) if best else None,  # each file crossing once
        "engine_x_limit": round(engine_s / (shipped / best), 2) if best else None,
        "s_per_gib": round(engine_s / shipped, 3),
        "node_peak_gib": result.get("node_peak_gib"),
    }


def markdown(rows: list[dict], limit: dict, command: str) -> str:
    keys = list(rows[0])
    measured = ", ".join(f"{k} {v}" for k, v in limit.items()) or "not measured in this run (--no-limits)"
    out = [f"`{command}`", "", f"limits: {measured}", ""]
    out += ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(str(r.get(k, "-")) for k in keys) + " |" for r in rows]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", required=True)
    parser.add_argument("--loaders", default="direct,direct:library,low_mem,rank0_broadcast,naive,staggered")
    parser.add_argument("--repeat", type=int, default=1, help="run the loaders this many times, in turn (a machine's noise)")
    parser.add_argument("--ship", action="store_true", help="merge this run's figures (each loader's median) into --speed-file")
    parser.add_argument("--speed-file", type=Path, default=SPEED_FILE, help="the file --ship writes (default: the package's)")
    parser.add_argument("--results", type=Path, default=BENCH / "results", help="where results/<name>/ goes")
    parser.add_argument("--no-limits", action="store_true", help="skip measuring the limits (a run before measured them)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of every job (model=..., device=..., lora=...)")
    args = parser.parse_args()
    command = "python bench/time_to_engine.py " + " ".join(sys.argv[1:])

    files = checkpoint_files(args.overrides)
    limit = {} if args.no_limits else limits(files)
    print("limits:", json.dumps(limit), flush=True)
    sweep_dir = Path("/tmp") / f"rlhf_exp_tte_{args.name}"
    shutil.rmtree(sweep_dir, ignore_errors=True)
    results = run_jobs([name for _ in range(args.repeat) for name in args.loaders.split(",")], args.overrides, sweep_dir)
    rows = [row(r, limit) for r in results if r["status"] == "completed"]
    out = args.results / args.name
    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, int] = {}
    for r in results:  # <loader>.json, then <loader>.2.json ... for repeats
        seen[r["name"]] = seen.get(r["name"], 0) + 1
        suffix = f".{seen[r['name']]}" if seen[r["name"]] > 1 else ""
        (out / f"{r['name'].replace(':', '_')}{suffix}.json").write_text(json.dumps(r, indent=1))
    (out / "time_to_engine.json").write_text(json.dumps({"command": command, "limits": limit, "rows": rows}, indent=1))
    text = markdown(rows, limit, command) if rows else f"`{command}`\n\nno job completed\n"
    (out / "time_to_engine.md").write_text(text)
    print(text)
    if args.ship and rows:
        ship(rows, command, results[0]["device"], args.speed_file)


def ship(rows: list[dict], command: str, device: str, speed_file: Path) -> None:
    """Merge this run's seconds per GiB into the shipped file (ship zero3_init from a ZeRO-3 run of that loader alone,
    the others from a ZeRO-2 run; --ship on another device starts the file afresh)."""
    shipped = json.loads(speed_file.read_text()) if speed_file.exists() else {}
    if shipped.get("device") != device:
        shipped = {}
    speed = shipped.get("seconds_per_gib", {})
    timed: dict[str, list[float]] = {}
    for r in rows:  # this run's loaders take its figures (the median of repeats); loaders it did not time keep theirs
        if ":" not in r["loader"]:
            timed.setdefault(r["loader"], []).append(r["s_per_gib"])
    speed.update({loader: statistics.median(figures) for loader, figures in timed.items()})
    commands = [c for c in shipped.get("commands", []) if c != command] + [command]
    speed_file.write_text(json.dumps({"device": device, "commands": commands, "seconds_per_gib": speed}, indent=1) + "\n")
    print(f"wrote {speed_file}")


if __name__ == "__main__":
    main()
