#!/usr/bin/env bash
# On one H200, in one device call (carry .whl): 2 ranks sharing the GPU build the engine with rank0_broadcast copying
# ref/reward on the GPU, reading them again (rank0_broadcast:reread) and with direct; every engine weight compared,
# after the engine and after a PPO step. Results: $OUT/twin.tar.gz (results/h200-twin-check/).
set -uo pipefail
source bench/device_env.sh
export PYTHONPATH=$SITE$PWD
NAME=h200-twin-check; SWEEP=/tmp/rlhf_exp_tte_$NAME
python3 bench/time_to_engine.py --results $KEEP --name $NAME --no-limits --loaders rank0_broadcast,rank0_broadcast:reread,direct \
  model=tiny device=cuda gpus=2 share_gpus=true verify_weights=true ppo.steps=1 plan.fit_check=false 2>&1 | grep -E "^\||^limits"
for w in $SWEEP/0_rank0_broadcast/weights/*.json; do r=$(basename "$w")
  for other in 1_rank0_broadcast_reread 2_direct; do
    cmp -s "$w" "$SWEEP/$other/weights/$r" && echo "$r: rank0_broadcast same as $other" || echo "$r: rank0_broadcast DIFFERS from $other"
  done; done | tee $KEEP/$NAME/compare.txt
python3 -c "
import json; r = json.load(open('$KEEP/$NAME/rank0_broadcast.json'))
print([(s['stage'], s.get('copied_from')) for s in r['stages'] if s['stage'].endswith('.load')])" | tee -a $KEEP/$NAME/compare.txt
tar czf "$OUT/twin.tar.gz" -C $KEEP .
