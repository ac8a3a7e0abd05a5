"""Generate (once) the actor and critic checkpoints of each model preset given, printing their size and time, so a
later bench does not time generation as loading.

    python bench/generate_checkpoints.py llama-7b llama-1.3b
"""

from __future__ import annotations

import sys
import time

from time_to_engine import GIB, checkpoint_files

if __name__ == "__main__":
    for model in sys.argv[1:]:
        start = time.perf_counter()
        files = checkpoint_files([f"model={model}"])
        print(model, f"{sum(f.stat().st_size for f in files) / GIB:.1f} GiB in {time.perf_counter() - start:.0f} s")
