"""A results folder: named by scenario and date, and its bench.json saying what made it (scenario, command, commit,
machine). RESULTS.md is built from these files."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from bench import REPO

PROVENANCE = "bench.json"
TABLE = "table.md"


def results_folder(root: Path, scenario: str, dry: bool) -> Path:
    """<root>/<scenario>-<date>[-dry][-N]: a new folder, never one an earlier run wrote."""
    base = f"{scenario}-{datetime.date.today().isoformat()}{'-dry' if dry else ''}"
    folder, n = root / base, 1
    while folder.exists():
        n += 1
        folder = root / f"{base}-{n}"
    folder.mkdir(parents=True)
    return folder


def machine() -> dict[str, Any]:
    gpus = []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)  # fmt: skip
        gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    mem_kib = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    # the kernel tells a lent machine's runtime apart (gVisor reports 4.4.0; Firecracker "...-fc-..."), and with it how
    # the node's memory figures behave (a Firecracker guest's balloon and hot-plugged memory)
    return {"host": platform.node(), "kernel": platform.release(), "cores": os.cpu_count(),
            "mem_total_gib": round(mem_kib / 2**20, 1), "gpus": gpus}  # fmt: skip


def commit() -> str | None:
    """The code's commit: $BENCH_COMMIT where given (the lent machine's copy of the tree may carry an older .git)."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return out.stdout.strip() or None


def write(folder: Path, scenario: str, command: str, dry: bool, extra: dict[str, Any]) -> None:
    record = {"scenario": scenario, "command": command, "date": datetime.date.today().isoformat(), "dry_run": dry,
              "commit": commit(), "machine": machine(), **extra}  # fmt: skip
    (folder / PROVENANCE).write_text(json.dumps(record, indent=1) + "\n")


def read(folder: Path) -> dict[str, Any] | None:
    path = folder / PROVENANCE
    return json.loads(path.read_text()) if path.exists() else None
