"""The CI stress helper: another process on the machine that allocates and frees about 1 GiB in a loop, so the
memory-figure tests run beside the kind of neighbour a shared CI box has (`python tests/memory_stress.py [GiB]`)."""

from __future__ import annotations

import sys
import time

GIB = 1024**3


def churn(gib: float = 1.0, hold_s: float = 0.4, gap_s: float = 0.4) -> None:
    while True:
        block = b"\x01" * int(gib * GIB)  # filled, so every page is really taken
        time.sleep(hold_s)
        del block
        time.sleep(gap_s)


if __name__ == "__main__":
    churn(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
