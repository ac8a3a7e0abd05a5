"""naive's load before (random fp32 init, as transformers' from_config does) and after (zero-filled fp32) in one run.

    python bench/naive_init.py --preset llama-7b --dtype fp16 --repeat 1

Each variant loads one role in a fresh process through the real loader (rlhf_exp.loaders.naive) and reports
its time and VmHWM (kernel). The target: VmHWM within 2 % of the random-init load, and faster.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="llama-350m")
    parser.add_argument("--dtype", default="fp16")
    parser.add_argument("--cache-dir", default="~/.cache/rlhf_exp")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from rlhf_exp.checkpoints.files import weight_bytes
    from rlhf_exp.checkpoints.generate import resolve_checkpoint

    ckpt = resolve_checkpoint(args.preset, None, "causal_lm", args.dtype, args.cache_dir)
    rows = []
    for _ in range(args.repeat):
        for init in ("random", "zeros"):
            out = subprocess.run([sys.executable, "-c", CHILD, str(ckpt), init], capture_output=True, text=True, check=True)
            rows.append({"init": init, **json.loads(out.stdout.strip().splitlines()[-1])})
    gib = 1 << 30
    print(f"naive load of {args.preset} ({weight_bytes(ckpt) / gib:.2f} GiB {args.dtype} checkpoint), one process each:")
    print("| fp32 init | load s | VmHWM GiB |\n|---|---|---|")
    for r in rows:
        print(f"| {r['init']} | {r['seconds']:.1f} | {r['vmhwm'] / gib:.3f} |")
    rnd, zer = (min(r["vmhwm"] for r in rows if r["init"] == i) for i in ("random", "zeros"))
    print(f"VmHWM zeros/random = {zer / rnd:.4f} (target within 2 %)")
    if args.out:
        args.out.write_text(json.dumps({"preset": args.preset, "dtype": args.dtype, "runs": rows}, indent=1))


if __name__ == "__main__":
    main()
