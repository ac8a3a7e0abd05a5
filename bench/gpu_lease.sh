#!/usr/bin/env bash
# One H200 lease for issues 15 (planner at real scale) and 17 (loading speed): every run in one script, the
# checkpoints generated once. Started detached, then followed by calls that read its log:
#   device run (carry .whl): setsid nohup bash bench/gpu_lease.sh > /tmp/lease.log 2>&1 &
#   device run (carry .whl): sleep 540; tail -30 /tmp/lease.log; bash bench/gpu_lease.sh pack
# DRY=1 rehearses it on CPU with small shapes (same steps, same files).
set -uo pipefail
if [ "${1:-}" = pack ]; then  # what exists so far, into $OUT (a later call's files replace an earlier's)
  tar czf "$OUT/lease.tar.gz" bench/results rlhf_exp/loaders/measured_speed.json /tmp/lease.log 2>/dev/null; exit 0
fi
if [ "${DRY:-0}" = 1 ]; then
  BIG=medium SMALL=tiny DEV=cpu RANKS=2 SHARE="" TAG=dry
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
  BIG=llama-7b SMALL=llama-1.3b DEV=cuda RANKS=8 SHARE="share_gpus=true" TAG=h200
fi
export RLHF_EXP_CACHE=/tmp/rlhf_exp_ckpt PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext WANDB_MODE=disabled
COMMON="device=$DEV lora=r128 plan.fit_check=false job_timeout_s=420"
step() { echo "=== $(date +%T) $*"; }
step "machine"; nproc; free -g | head -2; df -h /tmp | tail -1; nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null
python3 -c "import torch, transformers, deepspeed; print('torch', torch.__version__, 'transformers', transformers.__version__, 'deepspeed', deepspeed.__version__)"

step "checkpoints ($BIG pair, $SMALL pair), generated once"
python3 bench/generate_checkpoints.py $BIG $SMALL

step "time to engine, $BIG pair, ZeRO-2, gpus=1, every loader, one PPO step"
python3 bench/time_to_engine.py --name $TAG-7b-zero2 --ship --loaders direct,direct:library,low_mem,rank0_broadcast,naive \
  model=$BIG $COMMON ppo.steps=1
step "weights bit-identical: direct (fast_read) vs direct:library, $SMALL pair, gpus=1"
python3 bench/time_to_engine.py --name $TAG-digests --no-limits --loaders direct,direct:library model=$SMALL $COMMON verify_weights=true
for w in /tmp/rlhf_exp_tte_$TAG-digests/0_direct/weights/*.json; do r=$(basename "$w")
  cmp -s "$w" "/tmp/rlhf_exp_tte_$TAG-digests/1_direct_library/weights/$r" && echo "$r: fast_read same as from_pretrained" \
    || echo "$r: fast_read DIFFERS from from_pretrained"; done | tee bench/results/$TAG-digests/compare.txt
step "naive before/after (random init vs zero fill), $SMALL actor"
python3 bench/naive_init.py --preset $SMALL --cache-dir $RLHF_EXP_CACHE --out bench/results/$TAG-naive-init.json
step "time to engine, $BIG pair, ZeRO-3, gpus=1"
python3 bench/time_to_engine.py --name $TAG-7b-zero3 --ship --no-limits --loaders zero3_init,direct model=$BIG zero=stage3 $COMMON ppo.steps=1
step "PPO at 512+512 tokens, micro batch 4, $BIG pair, ZeRO-2"
python3 bench/time_to_engine.py --name $TAG-7b-ppo-long --no-limits --loaders direct model=$BIG $COMMON ppo.steps=1 \
  ppo.prompt_len=512 ppo.answer_len=512 train.micro_batch_size=4
step "a rank's base footprint (VmRSS and its private part), cpu and cuda"
python3 -c "
from pathlib import Path; from rlhf_exp.plan.inputs import probe_rank_base
for d in ('cpu', 'cuda'): print(d, probe_rank_base(d, Path('/tmp/probe')))
" | tee bench/results/$TAG-base-rss.txt
step "$RANKS ranks sharing the GPU, $SMALL pair, ZeRO-2"
python3 bench/time_to_engine.py --name $TAG-${RANKS}rank-zero2 --no-limits --loaders direct,naive,rank0_broadcast \
  model=$SMALL gpus=$RANKS $SHARE $COMMON
step "$RANKS ranks sharing the GPU, $SMALL pair, ZeRO-3"
python3 bench/time_to_engine.py --name $TAG-${RANKS}rank-zero3 --no-limits --loaders zero3_init model=$SMALL zero=stage3 \
  gpus=$RANKS $SHARE $COMMON
step "done"
