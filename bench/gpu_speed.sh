#!/usr/bin/env bash
# One H200 lease for issue 17's speed target, before and after in one run, on the same checkpoints: the last landed
# code (.before/: `git archive 39ce49e | tar -x -C .before`) and this tree, alternated twice; the issue's "today"
# (.today/: 57aa5f1, direct through from_pretrained) once. Results go to /tmp/keep (the device tool re-copies the
# tree at every call, deleting what a step wrote inside it) and come back with `pack`.
#   device run (carry .whl .before .today): setsid nohup bash bench/gpu_speed.sh > /tmp/lease.log 2>&1 < /dev/null &
#   device run (carry .whl .before .today): sleep 560; tail -40 /tmp/lease.log; bash bench/gpu_speed.sh pack
# DRY=1 PATH=$PWD/.venv/bin:$PATH rehearses it on CPU with small shapes (same steps, same files).
# Lease 1 and 2 (results/h200-speed-lease1/log.txt, results/h200-speed-lease2/) ran earlier versions of this script;
# lease 3 (results/h200-speed-lease3/) ran this one at ef4e3e2, whose "after" started DeepSpeed's compiler import in a
# thread at rank start and left fast_read's reads in flight under LoRA; both were measured, found no faster, reverted.
set -uo pipefail
if [ "${1:-}" = pack ]; then  # what exists so far, into $OUT (a later call's files replace an earlier's)
  tar czf "$OUT/lease.tar.gz" /tmp/keep /tmp/lease.log 2>/dev/null; exit 0
fi
source bench/device_env.sh
if [ "${DRY:-0}" = 1 ]; then BIG=medium SMALL=tiny DEV=cpu TAG=dry; else BIG=llama-7b SMALL=llama-1.3b DEV=cuda TAG=h200; fi
COMMON="device=$DEV lora=r128 plan.fit_check=false job_timeout_s=420"
step() { echo "=== $(date +%T) $*"; }
tte() { PYTHONPATH=$SITE$PWD python3 bench/time_to_engine.py --results $KEEP "$@" 2>&1 | grep -vE "UserWarning|Error importing|Plugin is|Recommended|ModuleNotFound|warnings.warn"; }
old() {  # time_to_engine from an older tree ($1), results copied to $KEEP, its whole console in $KEEP/<name>.log
  local tree=$1 name=$2; shift 2
  (cd "$tree" && PYTHONPATH=$SITE$PWD python3 bench/time_to_engine.py --name "$name" "$@" > $KEEP/$name.log 2>&1;
    grep -E "^\||^limits|^\`" $KEEP/$name.log || tail -20 $KEEP/$name.log; cp -r "bench/results/$name" $KEEP/)
}
step "machine"; nproc; free -g | head -2; df -h /tmp | tail -1; nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null

step "checkpoints ($BIG pair, $SMALL pair), generated once"
PYTHONPATH=$SITE$PWD python3 bench/generate_checkpoints.py $BIG $SMALL
step "bytecode cache warmed (the modules an engine build imports, both trees)"
PYTHONPATH=$SITE$PWD python3 -c "import deepspeed.runtime.zero.muon.muon_optimizer, transformers, peft, rlhf_exp.rank.main"
(cd .before && PYTHONPATH=$SITE$PWD python3 -c "import rlhf_exp.rank.main")

step "read pieces: pinned buffers, GPU allocation, the read with DeepSpeed's compiler import serial vs early ($BIG actor)"
PYTHONPATH=$SITE$PWD python3 bench/read_pieces.py --out $KEEP/$TAG-read-pieces.json model=$BIG 2>&1 | grep -v WARN

step "time to engine, $BIG pair, ZeRO-2, gpus=1, direct: before (.before), after (this tree), alternated twice"
old .before $TAG-7b-before-1 --no-limits --loaders direct model=$BIG $COMMON
tte --name $TAG-7b-after-1 --loaders direct,direct:library model=$BIG $COMMON
old .before $TAG-7b-before-2 --no-limits --loaders direct model=$BIG $COMMON
tte --name $TAG-7b-after-2 --no-limits --loaders direct model=$BIG $COMMON
step "the issue's today (.today, 57aa5f1): direct through from_pretrained"
old .today $TAG-7b-today --no-limits --loaders direct:library model=$BIG $COMMON

step "weights bit-identical: naive vs direct vs rank0_broadcast (reads in flight under LoRA), $SMALL pair, one PPO step"
tte --name $TAG-digests --no-limits --loaders naive,direct,rank0_broadcast model=$SMALL $COMMON verify_weights=true ppo.steps=1
SW=/tmp/rlhf_exp_tte_$TAG-digests
for w in $SW/0_naive/weights/*.json; do r=$(basename "$w")
  for other in 1_direct 2_rank0_broadcast; do
    cmp -s "$w" "$SW/$other/weights/$r" && echo "$r: $other same as naive" || echo "$r: $other DIFFERS from naive"
  done
done | tee $KEEP/$TAG-digests/compare.txt

step "after, profiled (profile=true): where the engine's time goes"
tte --name $TAG-7b-profile --no-limits --loaders direct model=$BIG $COMMON profile=true
PYTHONPATH=$SITE$PWD python3 -c "
import pstats, sys
s = pstats.Stats('/tmp/rlhf_exp_tte_$TAG-7b-profile/0_direct/profiles/rank0.prof')
s.sort_stats('cumulative').print_stats(45); s.sort_stats('tottime').print_stats(20)" > $KEEP/$TAG-7b-profile/profile.txt
head -80 $KEEP/$TAG-7b-profile/profile.txt

step "every loader re-timed for loader=auto's order (--ship into a copy of measured_speed.json), $BIG pair"
cp rlhf_exp/loaders/measured_speed.json $KEEP/measured_speed.json
tte --name $TAG-7b-ship --no-limits --ship --speed-file $KEEP/measured_speed.json \
  --loaders direct,rank0_broadcast,low_mem,naive model=$BIG $COMMON
tte --name $TAG-7b-ship-zero3 --no-limits --ship --speed-file $KEEP/measured_speed.json \
  --loaders zero3_init model=$BIG zero=stage3 $COMMON
tte --name $TAG-7b-ship-staggered --no-limits --ship --speed-file $KEEP/measured_speed.json \
  --loaders staggered model=$BIG $COMMON
cat $KEEP/measured_speed.json
step "done"
