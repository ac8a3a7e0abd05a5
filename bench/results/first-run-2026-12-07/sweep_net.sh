#!/usr/bin/env bash
# A sweep's later jobs after an earlier job's exit: node Δ against node Δ net of the per-CPU lists (checkpoints on disk).
set -u
cd /work/main
PY=/work/main/.venv/bin/python
C=/tmp/fr/sweepcache
ARGS="model=llama-1.3b gpus=1 roles=[actor] ppo.steps=0 wandb.mode=disabled model.cache_dir=$C"
$PY -m rlhf_exp $ARGS hydra.run.dir=/tmp/fr/sweep-gen > /dev/null 2>&1  # generates the pair (and settles)
sleep 60
rm -rf /tmp/fr/sweep
$PY -m rlhf_exp -m $ARGS loader=naive,staggered,low_mem hydra.sweep.dir=/tmp/fr/sweep > /tmp/fr/sweep.console 2>&1
$PY - <<'PY'
import json, pathlib
for f in sorted(pathlib.Path("/tmp/fr/sweep").glob("*/result.json")):
    res = json.loads(f.read_text())
    lists = res["baseline"]["meminfo_gib"]["PerCpuFreeLists"]
    plan = {s["stage"]: s["node_peak_gib"] for s in res["plan"]["stages"]}
    print(f"{f.parent.name} {res['loader']:10s} lists at baseline {lists:.3f}:", "  ".join(
        f"{s['stage']} plan {plan[s['stage']]:.3f} node {s['node_peak_gib']:.3f} net {s['node_net_peak_gib']:.3f}"
        for s in res["stages"] if s["stage"] != "dist_init"))
PY
