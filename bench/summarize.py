"""Rebuild bench/RESULTS.md from every bench/results/<name>/*.json (the app's own result files).

python bench/summarize.py
"""

from __future__ import annotations

import json
from pathlib import Path

from loader_sweep import markdown, row_of

BENCH = Path(__file__).resolve().parent
INTRO = """# Benchmark results

Every figure below comes from a `result.json` written by the app itself (`python -m rlhf_exp`):
kernel readings (MemTotal−MemAvailable sampled by the watcher, VmHWM, Pss_Anon) and framework
readings (torch.cuda, NVML). Raw files: `bench/results/<name>/<loader>.json`. Scripts:
`bench/loader_sweep.py` (one sweep), `bench/gpu_h200.sh` (the H200 runs), this file (the tables).

Columns: `node_peak_gib` = whole-job node peak above the baseline before ranks started;
`actor_load_rise_gib` = how far node memory rose during `actor.load` above its level when the stage
began (the transient cost of loading one model on every rank); `_x_ckpt` = that rise over the
actor checkpoint's bytes.
"""


def stage_table(result: dict) -> str:
    keys = [
        "stage",
        "duration_s",
        "node_peak_gib",
        "node_rise_gib",
        "rank_peak_rss_max_gib",
        "gpu_cuda_peak_allocated_gib",
        "gpu_cuda_reserved_gib",
        "gpu_nvml_used_gib",
    ]
    rows = [{k: row.get(k) for k in keys} for row in result["stages"]]
    for row in rows:
        row["duration_s"] = round(row["duration_s"], 2) if row["duration_s"] else None
    return markdown(rows, f"Per stage, {result['loader']} (gpus={result['gpus']}, status {result['status']}):")


def read_json(path: Path) -> dict:
    data = json.loads(path.read_text())
    return data if isinstance(data, dict) else {}


def main() -> None:
    parts = [INTRO]
    for folder in sorted(p for p in (BENCH / "results").rglob("*") if p.is_dir()):
        results = [r for r in map(read_json, sorted(folder.glob("*.json"))) if "checkpoint_gib" in r]  # result files only
        if not results:
            continue
        first = results[0]
        ckpt = first["checkpoint_gib"]
        header = (
            f"## {folder.relative_to(BENCH / 'results')}: gpus={first['gpus']}, device={first['device']}, "
            f"backend={first['backend']}, "
            f"actor ckpt {ckpt['actor']} GiB, critic ckpt {ckpt['critic']} GiB, zero stages {first['zero_stages']}"
        )
        parts.append(markdown([row_of(r) for r in results], header))
        naive = next((r for r in results if r["loader"] == "naive"), None)
        if naive and naive["device"] == "cuda":
            parts.append(stage_table(naive))
    (BENCH / "RESULTS.md").write_text("\n".join(parts))
    print((BENCH / "RESULTS.md").read_text())


if __name__ == "__main__":
    main()
