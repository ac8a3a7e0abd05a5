"""After generating the llama-1.3b pair: the node's drift in the 60 s after settle_node, with the old 2 s window and
the new 10 s one (each after a fresh generation)."""

import shutil
import sys
import time

from bench import GIB
from bench.jobs import checkpoint_files
from rlhf_exp.memory.kernel import node_used_bytes, percpu_free_bytes
from rlhf_exp.memory.settle import settle_node

cache = sys.argv[1]
for name, settle_args in (("old: 2 s window", {"window": 5}), ("new: 10 s window", {})):  # new: settle_node as it is
    shutil.rmtree(cache, ignore_errors=True)
    t = time.monotonic()
    files = checkpoint_files(["model=llama-1.3b", f"model.cache_dir={cache}"])
    print(
        f"== {name}: generated {sum(f.stat().st_size for f in files) / GIB:.1f} GiB in {time.monotonic() - t:.0f} s; "
        f"per-CPU free lists {percpu_free_bytes() / GIB:.2f} GiB",
        flush=True,
    )
    print(settle_node(**settle_args).describe(), flush=True)
    base = node_used_bytes()
    for i in range(6):
        time.sleep(10)
        print(
            f"  {10 * (i + 1):3d} s after the baseline: node {(node_used_bytes() - base) / GIB:+.3f} GiB, "
            f"per-CPU free lists {percpu_free_bytes() / GIB:.2f} GiB",
            flush=True,
        )
