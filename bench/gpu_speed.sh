#!/usr/bin/env bash
# One H200 lease for issue 17's speed target, before and after in one run: the previous code (a copy in .before/,
# made with `git archive 57aa5f1 | tar -x -C .before`: the tree before this lease's changes) and this tree, on the
# same checkpoints. Results go to /tmp/keep (the device tool re-copies the tree at every call, deleting what a
# step wrote inside it) and come back with `pack`.
#   device run (carry .whl, .before): setsid nohup bash bench/gpu_speed.sh > /tmp/lease.log 2>&1 < /dev/null &
#   device run (carry .whl, .before): sleep 500; tail -40 /tmp/lease.log; bash bench/gpu_speed.sh pack
# DRY=1 PATH=$PWD/.venv/bin:$PATH rehearses it on CPU with small shapes (same steps, same files).
# Lease 1 (results/h200-speed-lease1/log.txt) ran the 'before', 'after', profile and chunk64/threads32 steps of the
# first version of this script; this version adds copy_twin (direct:reread is the read-again path) and small chunks.
set -uo pipefail
KEEP=/tmp/keep
if [ "${1:-}" = pack ]; then  # what exists so far, into $OUT (a later call's files replace an earlier's)
  tar czf "$OUT/lease.tar.gz" $KEEP /tmp/lease.log 2>/dev/null; exit 0
fi
if [ "${DRY:-0}" = 1 ]; then
  BIG=medium SMALL=tiny DEV=cpu TAG=dry SITE=""
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  BIG=llama-7b SMALL=llama-1.3b DEV=cuda TAG=h200 SITE=/tmp/site:
fi
mkdir -p $KEEP
# a pip install writes bytecode for every module; the device image sets PYTHONDONTWRITEBYTECODE and installs with
# --no-compile, so each process would compile torch's and DeepSpeed's lazily imported modules from source (2.2 s of
# lease 1's profiled engine build): cache it, as an ordinary install has it
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pycache
export RLHF_EXP_CACHE=/tmp/rlhf_exp_ckpt PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext WANDB_MODE=disabled
COMMON="device=$DEV lora=r128 plan.fit_check=false job_timeout_s=420"
step() { echo "=== $(date +%T) $*"; }
step "machine"; nproc; free -g | head -2; df -h /tmp | tail -1; nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null
python3 -c "import sys, os; print('dont_write_bytecode', sys.flags.dont_write_bytecode, os.environ.get('PYTHONPYCACHEPREFIX'))"
ls -d /opt/torch/.venv/lib/python3.12/site-packages/torch/_inductor/__pycache__ 2>&1 | head -1

step "checkpoints ($BIG pair, $SMALL pair), generated once"
PYTHONPATH=$SITE$PWD python3 bench/generate_checkpoints.py $BIG $SMALL

step "bytecode cache warmed (the modules an engine build imports)"
PYTHONPATH=$SITE$PWD python3 -c "import deepspeed.runtime.zero.muon.muon_optimizer, transformers, peft, rlhf_exp.rank.main"
step "BEFORE (.before): time to engine, $BIG pair, ZeRO-2, gpus=1: direct and the library path"
(cd .before && PYTHONPATH=$SITE$PWD python3 bench/time_to_engine.py --name $TAG-7b-before --no-limits \
  --loaders direct,direct:library model=$BIG $COMMON && cp -r bench/results/$TAG-7b-before $KEEP/)
export PYTHONPATH=$SITE$PWD
step "AFTER: time to engine, $BIG pair, ZeRO-2, gpus=1, limits measured: copy_twin, read again, the library path"
python3 bench/time_to_engine.py --results $KEEP --name $TAG-7b-after --loaders direct,direct:reread,direct:library,rank0_broadcast \
  model=$BIG $COMMON
step "AFTER: fast_read's chunk, $BIG pair: 4 and 8 MiB (16 threads: 128 and 256 MiB pinned per load)"
for c in 4 8; do
  python3 bench/time_to_engine.py --results $KEEP --name $TAG-7b-chunk$c --no-limits --loaders direct model=$BIG $COMMON loader.chunk_mib=$c
done
step "weights bit-identical: ref/reward copied on the GPU vs read again, $SMALL pair, one PPO step"
python3 bench/time_to_engine.py --results $KEEP --name $TAG-digests-twin --no-limits --loaders direct,direct:reread model=$SMALL \
  $COMMON verify_weights=true ppo.steps=1
for w in /tmp/rlhf_exp_tte_$TAG-digests-twin/0_direct/weights/*.json; do r=$(basename "$w")
  cmp -s "$w" "/tmp/rlhf_exp_tte_$TAG-digests-twin/1_direct_reread/weights/$r" && echo "$r: copied same as read" \
    || echo "$r: copied DIFFERS from read"; done | tee $KEEP/$TAG-digests-twin/compare.txt
step "done"
