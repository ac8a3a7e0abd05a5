"""The bench: named scenarios that measure the app on a real machine and print their tables.

    python -m bench list                       # the scenarios, what each measures
    python -m bench run SCENARIO... [--dry-run] # run them; results/<scenario>-<date>/ and a table each

Every figure comes from the app's own result.json (kernel and framework readings) or from a measurement the
scenario makes in the same run; the bench only arranges them. See bench/README.md.
"""

from __future__ import annotations

from pathlib import Path

from rlhf_exp.config.units import GIB as GIB  # the bench's figures in the app's unit

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
