#!/usr/bin/env bash
# A preset's first run without the settle (no_settle.py), then its second: node Δ against node Δ net of the per-CPU lists.
set -u
cd /work/main
PY=/work/main/.venv/bin/python
OUT=${OUT:-/tmp/fr/net}; mkdir -p $OUT
ARGS="model=llama-1.3b gpus=1 roles=[actor] ppo.steps=0 wandb.mode=disabled"
for round in 1 2; do
  C=/tmp/fr/netcache$round; rm -rf $C
  echo "== round $round ($(date +%T))"
  $PY /tmp/fr/no_settle.py $ARGS model.cache_dir=$C hydra.run.dir=$OUT/r$round-first > $OUT/r$round-first.log 2>&1
  $PY -m rlhf_exp $ARGS model.cache_dir=$C hydra.run.dir=$OUT/r$round-second > $OUT/r$round-second.log 2>&1
  rm -rf $C
done
$PY - <<'PY'
import json, os
out = os.environ.get("OUT", "/tmp/fr/net")
for r in (1, 2):
    for which in ("first", "second"):
        res = json.load(open(f"{out}/r{r}-{which}/result.json"))
        lists = res["baseline"]["meminfo_gib"]["PerCpuFreeLists"]
        print(f"round {r} {which:6s} lists at baseline {lists:.3f}:", "  ".join(
            f"{s['stage']} node {s['node_peak_gib']:.3f} net {s['node_net_peak_gib']:.3f}" for s in res["stages"]))
PY
