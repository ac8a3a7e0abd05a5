"""naive's load before (random fp32 init, as transformers' from_config does) and after (zero-filled fp32) in one run.

    python -m bench run naive-init          # the scenario: the llama-1.3b actor

Each variant loads one role in a fresh process through the real loader (rlhf_exp.loaders.naive) and reports
its time and VmHWM (kernel). The target: VmHWM within 2 % of the random-init load, and faster.
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench import GIB
from bench.scenario import Context
from bench.tools.tables import markdown

CHILD = """
import json, sys, time, torch
from pathlib import Path
from rlhf_exp.loaders.base import LoadRequest
from rlhf_exp.loaders.naive import load_naive
from rlhf_exp.memory import kernel
request = LoadRequest("actor", "causal_lm", Path(sys.argv[1]), torch.float32, torch.device("cpu"), {})
before = kernel.process_status()["VmRSS"]
start = time.perf_counter()
load_naive(request, random_init=sys.argv[2] == "random")
print(json.dumps({"seconds": time.perf_counter() - start, "vmhwm": kernel.process_status()["VmHWM"], "rss_before": before}))
"""


def measure(preset: str, dtype: str = "fp16", repeat: int = 1) -> tuple[list[dict], float]:
    from rlhf_exp.checkpoints.files import weight_bytes
    from rlhf_exp.checkpoints.generate import resolve_checkpoint
    from rlhf_exp.config.compose import compose_config
    from rlhf_exp.config.schema import validate

    cache_dir = validate(compose_config([])).model.cache_dir  # $RLHF_EXP_CACHE, as the app's
    ckpt = resolve_checkpoint(preset, None, "causal_lm", dtype, cache_dir)
    rows = []
    for _ in range(repeat):
        for init in ("random", "zeros"):
            out = subprocess.run([sys.executable, "-c", CHILD, str(ckpt), init], capture_output=True, text=True, check=True)
            rows.append({"init": init, **json.loads(out.stdout.strip().splitlines()[-1])})
    return rows, weight_bytes(ckpt) / GIB


def table(ctx: Context) -> str:
    preset = ctx.sizes["small"]
    rows, gib = measure(preset)
    (ctx.out / "naive_init.json").write_text(json.dumps({"preset": preset, "dtype": "fp16", "runs": rows}, indent=1))
    rnd, zer = (min(r["vmhwm"] for r in rows if r["init"] == i) for i in ("random", "zeros"))
    shown = [{"fp32 init": r["init"], "load s": round(r["seconds"], 1), "VmHWM GiB": round(r["vmhwm"] / GIB, 3)} for r in rows]
    return (
        f"naive load of the {preset} actor ({gib:.2f} GiB fp16 checkpoint), one process each:\n\n"
        + markdown(shown)
        + f"\nVmHWM zeros/random = {zer / rnd:.4f} (target within 2 %)\n"
    )
