"""This host's memory speeds as naive's load and DeepSpeed's cast meet them: fresh pages first touched (zero fill,
fp32 -> bf16 cast, copies; the zero fill again at once and after an idle spell, where a VM's free page reporting
has handed the freed pages back to its host), a private read of a file in the page cache (read_bytes,
safetensors' deserialize, parallel preads into tensors), and host to GPU (pageable, pinned). Each in a fresh
process, with torch's CPU allocator as it is and with THP_MEM_ALLOC_ENABLE=1 (2 MiB-aligned allocations advised as
transparent huge pages), and with 1 thread and all cores: where naive's minutes go, and what would make them seconds.

    python -m bench run host-speed                  # 4 GiB per figure
    python -m bench.tools.host_speed --gib 0.25     # one process's figures, as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import GIB
from bench.scenario import Context
from bench.tools.tables import markdown
from rlhf_exp.memory.kernel import free_page_reporting

CHUNK = 16 << 20


def timed(fn, nbytes: int) -> float:
    """GiB/s of fn over nbytes (fn's result is dropped after the timing)."""
    start = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - start
    del out
    return round(nbytes / GIB / seconds, 2)


def pread_into(path: Path, threads: int):
    import torch

    size = path.stat().st_size
    out = torch.empty(size, dtype=torch.uint8)
    view = memoryview(out.numpy())
    fd = os.open(path, os.O_RDONLY)

    def work(index: int) -> None:
        for off in range(index * CHUNK, size, threads * CHUNK):
            os.preadv(fd, [view[off : off + CHUNK]], off)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))
    os.close(fd)
    return out


def fresh_page_figures(n: int, idle_s: float) -> dict[str, float]:
    """A zero fill of n bytes three times: the first in this process, again at once (the pages just freed, still
    backed by the host) and again after idle_s (a VM with free page reporting has returned them to its host by then,
    and each first touch faults them in there again: with huge pages 1.1 against 18.6 GiB/s on the 2-core CI box,
    bench/results/host-speed-2026-12-07)."""
    import torch

    def fill():
        return torch.empty(n // 4, dtype=torch.float32).zero_()

    first, again = timed(fill, n), timed(fill, n)
    time.sleep(idle_s)
    return {"zero_fill_fp32": first, "zero_fill_fp32_again": again, "zero_fill_fp32_after_idle": timed(fill, n)}


def resident_source_figures(src, n: int) -> dict[str, float]:
    """Writes into fresh pages from a resident fp32 source: the cast DeepSpeed does, a clone, a copy."""
    import torch

    return {
        "cast_fp32_to_bf16": timed(lambda: src.to(torch.bfloat16), n),
        "clone": timed(lambda: src.clone(), n),
        "copy_into_fresh": timed(lambda: torch.empty_like(src).copy_(src), n),
    }


def deserialize_figure(data: bytes, load) -> float:
    return timed(lambda: load(data), len(data))


def figures(gib: float, folder: Path, idle_s: float) -> dict[str, float | None]:
    import torch
    from safetensors.torch import load, save_file

    n = int(gib * GIB)
    threads = torch.get_num_threads()
    raw = folder / "raw.bin"
    if not raw.exists():
        torch.ones(n, dtype=torch.uint8).numpy().tofile(raw)
        save_file({f"w{i}": torch.ones(n // 8, dtype=torch.float16) for i in range(4)}, folder / "model.safetensors")
    raw.read_bytes()  # into the page cache
    out: dict[str, float | None] = {"threads": threads}
    out |= fresh_page_figures(n, idle_s)
    out |= resident_source_figures(torch.ones(n // 4, dtype=torch.float32), n)
    out["read_bytes"] = timed(raw.read_bytes, n)
    out["safetensors_deserialize"] = deserialize_figure((folder / "model.safetensors").read_bytes(), load)
    out["pread_16_threads"] = timed(lambda: pread_into(raw, 16), n)
    if torch.cuda.is_available():
        host = torch.ones(n // 2, dtype=torch.bfloat16)
        torch.empty(1, device="cuda")
        out["pageable_to_gpu"] = timed(lambda: (host.to("cuda"), torch.cuda.synchronize()), n)
        pinned = host.pin_memory()
        out["pinned_to_gpu"] = timed(lambda: (pinned.to("cuda"), torch.cuda.synchronize()), n)
    return out


VARIANTS = {  # name: environment of the measuring process
    "as is, all cores": {},
    "THP, all cores": {"THP_MEM_ALLOC_ENABLE": "1"},
    "as is, 1 thread": {"OMP_NUM_THREADS": "1"},
    "THP, 1 thread": {"THP_MEM_ALLOC_ENABLE": "1", "OMP_NUM_THREADS": "1"},
}


def table(ctx: Context) -> str:
    gib, idle_s = float(ctx.sizes["gib"]), ctx.sizes["idle_s"]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, env in list(VARIANTS.items())[: 2 if ctx.dry else None]:  # a dry run: all cores, with and without THP
            cmd = [sys.executable, "-m", "bench.tools.host_speed", "--gib", str(gib), "--idle-s", idle_s, "--folder", folder]
            proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=True)
            rows.append({"variant": name, **json.loads(proc.stdout.strip().splitlines()[-1])})
    (ctx.out / "host_speed.json").write_text(json.dumps(rows, indent=1))
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    head = (
        f"GiB/s over {gib} GiB per figure; after_idle: after {idle_s} s idle; THP: "
        f"{thp.read_text().strip() if thp.exists() else 'unknown'}; free page reporting: {free_page_reporting()}"
    )
    return markdown(rows, head)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=0.25)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    print(json.dumps(figures(args.gib, args.folder, args.idle_s)))
