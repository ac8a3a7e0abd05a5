#!/usr/bin/env bash
# One H200 lease for issue 17's speed target, before and after in one run: the previous commit's code (a copy in
# .before/, made with `git archive <commit> | tar -x -C .before`) and this tree, on the same checkpoints.
#   device run (carry .whl, .before): setsid nohup bash bench/gpu_speed.sh > /tmp/lease.log 2>&1 < /dev/null &
#   device run (carry .whl, .before): sleep 500; tail -40 /tmp/lease.log; bash bench/gpu_speed.sh pack
# DRY=1 PATH=$PWD/.venv/bin:$PATH rehearses it on CPU with small shapes (same steps, same files).
set -uo pipefail
if [ "${1:-}" = pack ]; then  # what exists so far, into $OUT (a later call's files replace an earlier's)
  tar czf "$OUT/lease.tar.gz" bench/results .before/bench/results rlhf_exp/loaders/measured_speed.json /tmp/lease.log \
    2>/dev/null; exit 0
fi
if [ "${DRY:-0}" = 1 ]; then
  BIG=medium SMALL=tiny DEV=cpu TAG=dry SITE=""
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  BIG=llama-7b SMALL=llama-1.3b DEV=cuda TAG=h200 SITE=/tmp/site:
fi
export RLHF_EXP_CACHE=/tmp/rlhf_exp_ckpt PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext WANDB_MODE=disabled
COMMON="device=$DEV lora=r128 plan.fit_check=false job_timeout_s=420"
step() { echo "=== $(date +%T) $*"; }
step "machine"; nproc; free -g | head -2; df -h /tmp | tail -1; nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null

step "checkpoints ($BIG pair, $SMALL pair), generated once"
for m in $BIG $SMALL; do
  PYTHONPATH=$SITE$PWD python3 - "$m" <<'EOF'
import sys, time
from bench.time_to_engine import checkpoint_files
start = time.perf_counter()
files = checkpoint_files([f"model={sys.argv[1]}"])
print(sys.argv[1], f"{sum(f.stat().st_size for f in files) / 2**30:.1f} GiB in {time.perf_counter() - start:.0f} s")
EOF
done

step "BEFORE (.before): time to engine, $BIG pair, ZeRO-2, gpus=1: direct and the library path"
(cd .before && PYTHONPATH=$SITE$PWD python3 bench/time_to_engine.py --name $TAG-7b-before --no-limits \
  --loaders direct,direct:library model=$BIG $COMMON)
export PYTHONPATH=$SITE$PWD
step "AFTER: time to engine, $BIG pair, ZeRO-2, gpus=1, limits measured, shipped to loader=auto"
python3 bench/time_to_engine.py --name $TAG-7b-speed --ship --loaders direct,direct:library,low_mem,rank0_broadcast \
  model=$BIG $COMMON
step "AFTER: direct profiled (profile=true), $BIG pair"
python3 bench/time_to_engine.py --name $TAG-7b-profile --no-limits --loaders direct model=$BIG $COMMON profile=true
PROF=/tmp/rlhf_exp_tte_$TAG-7b-profile/0_direct/profiles/rank0.prof
cp "$PROF" bench/results/$TAG-7b-profile/ 2>/dev/null
python3 -c "import pstats, sys; s = pstats.Stats(sys.argv[1]); s.sort_stats('cumulative').print_stats(60); s.sort_stats('tottime').print_stats(25)" \
  "$PROF" > bench/results/$TAG-7b-profile/top.txt 2>&1; grep -E "^ +[0-9]" bench/results/$TAG-7b-profile/top.txt | head -70
step "AFTER: fast_read variants, $BIG pair: 64 MiB chunks; 32 threads"
python3 bench/time_to_engine.py --name $TAG-7b-chunk64 --no-limits --loaders direct model=$BIG $COMMON loader.chunk_mib=64
python3 bench/time_to_engine.py --name $TAG-7b-threads32 --no-limits --loaders direct model=$BIG $COMMON loader.read_threads=32
step "weights bit-identical across loaders with LoRA made on the GPU: naive vs direct, $SMALL pair, one PPO step"
python3 bench/time_to_engine.py --name $TAG-digests-lora --no-limits --loaders direct,naive model=$SMALL $COMMON \
  verify_weights=true ppo.steps=1
for w in /tmp/rlhf_exp_tte_$TAG-digests-lora/0_direct/weights/*.json; do r=$(basename "$w")
  cmp -s "$w" "/tmp/rlhf_exp_tte_$TAG-digests-lora/1_naive/weights/$r" && echo "$r: direct same as naive" \
    || echo "$r: direct DIFFERS from naive"; done | tee bench/results/$TAG-digests-lora/compare.txt
step "done"
