#!/usr/bin/env bash
# The app's first run of a preset (generated in the job process before its baseline) against a second run (on disk).
set -u
cd "${TREE:-/work/main}"
PY=/work/main/.venv/bin/python
OUT=${OUT:-/tmp/fr/out}; mkdir -p $OUT
for round in 1 2; do
  C=/tmp/fr/cache$round; rm -rf $C
  for which in first second; do
    D=$OUT/r$round-$which; rm -rf $D
    echo "== round $round, $which run ($(date +%T))"
    $PY -m rlhf_exp model=llama-1.3b gpus=1 'roles=[actor]' ppo.steps=0 wandb.mode=disabled model.cache_dir=$C hydra.run.dir=$D 2>&1 | grep -E "plan:|settl|actor|dist_init|status|FAILED" | head -12
  done
done
