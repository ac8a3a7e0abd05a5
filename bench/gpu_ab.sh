#!/usr/bin/env bash
# A/B of two source trees on the same machine and checkpoints: time_to_engine of `direct` (or $LOADERS) on the llama-7b
# pair, the trees alternated three times (the machine's noise is as large as the effects looked for), results to
# /tmp/keep/<name>-a-N and -b-N. Run after bench/gpu_speed.sh in the same lease (its checkpoints and /tmp/site).
#   git archive <commit> | tar -x -C .before                       # tree b, carried
#   device run (carry .whl .before): bash bench/gpu_ab.sh . .before h200-ab; bash bench/gpu_speed.sh pack
# Lease 3 ran it with this tree at b78f604 (fast_read's reads left in flight under LoRA) against 39ce49e:
# results/h200-speed-lease3/h200-ab-*: engine 5.87/6.34/4.74 s against 6.18/5.86/6.04 s, no gain.
set -uo pipefail
A=$1 B=$2 NAME=$3 LOADERS=${LOADERS:-direct}
source bench/device_env.sh
COMMON="model=llama-7b device=cuda lora=r128 plan.fit_check=false job_timeout_s=420"
run() {  # tree, name
  (cd "$1" && PYTHONPATH=$SITE$PWD python3 bench/time_to_engine.py --results $KEEP --name "$2" --no-limits \
    --loaders "$LOADERS" $COMMON 2>&1 | grep -E "^\| ")
}
for i in 1 2 3; do
  run "$B" "$NAME-b-$i"
  run "$A" "$NAME-a-$i"
done
