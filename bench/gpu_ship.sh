#!/usr/bin/env bash
# One device call (carry .whl): loader=auto's figures for direct and rank0_broadcast, each timed three times in turn
# on the llama-7b pair (gpus=1: the same code path, so only repeats tell them apart from the machine's noise), merged
# by median into a copy of measured_speed.json. Results: $OUT/ship.tar.gz. DRY=1 PATH=$PWD/.venv/bin:$PATH rehearses.
set -uo pipefail
source bench/device_env.sh
export PYTHONPATH=$SITE$PWD
if [ "${DRY:-0}" = 1 ]; then BIG=medium DEV=cpu TAG=dry; else BIG=llama-7b DEV=cuda TAG=h200; fi
python3 bench/generate_checkpoints.py $BIG 2>&1 | tail -1
python3 -c "import deepspeed.runtime.zero.muon.muon_optimizer, transformers, peft, rlhf_exp.rank.main" 2>/dev/null
cp rlhf_exp/loaders/measured_speed.json $KEEP/measured_speed.json
python3 bench/time_to_engine.py --results $KEEP --name $TAG-7b-ship-repeat --no-limits --repeat 3 --ship \
  --speed-file $KEEP/measured_speed.json --loaders direct,rank0_broadcast model=$BIG device=$DEV lora=r128 \
  plan.fit_check=false job_timeout_s=300 2>&1 | grep -E "^\||^wrote"
cat $KEEP/measured_speed.json
if [ -n "${OUT:-}" ]; then tar czf "$OUT/ship.tar.gz" $KEEP; fi
