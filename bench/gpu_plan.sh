#!/usr/bin/env bash
# Planner vs measured on one H200 (issue 6), a PPO step on GPU (issue 7) and the GPU-host bad-input row (issue 8).
# Run through the `device` tool from the repo root with carry=[".whl"]:
#   bash bench/gpu_plan.sh one      # gpus=1: llama-1.3b actor, naive/low_mem/direct, LoRA r128, one PPO step
#   bash bench/gpu_plan.sh shared   # 8 ranks sharing the GPU: low_mem, direct (ZeRO-2) and zero3_init (ZeRO-3)
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD RLHF_EXP_CACHE=/tmp/rlhf_exp_ckpt PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext WANDB_MODE=disabled
mkdir -p bench/results
run_sweep() {  # name, overrides...
  local name=$1; shift
  python3 -m rlhf_exp -m hydra.sweep.dir=/tmp/sweeps/$name model=llama-1.3b device=cuda lora=r128 "$@" 2>&1 | grep -E "result:|FAILED|error" 
  mkdir -p bench/results/$name
  for d in /tmp/sweeps/$name/*/; do cp "$d/result.json" "bench/results/$name/$(basename "$d").json"; done
  python3 bench/plan_check.py /tmp/sweeps/$name --out bench/results/$name/plan_vs_measured.md
}
case "${1:-one}" in
  one)
    echo "--- bad input on a GPU host (README row):"; python3 -m rlhf_exp gpus=64 device=cuda 2>&1 | tail -1
    echo "--- plan, 8 ranks sharing the GPU, naive:"; python3 -m rlhf_exp plan model=llama-1.3b device=cuda gpus=8 share_gpus=true lora=r128 loader=naive
    run_sweep h200-1gpu-plan gpus=1 loader=naive,low_mem,direct ppo.steps=1 ;;
  shared)
    run_sweep h200-8rank-plan-zero2 gpus=8 share_gpus=true loader=low_mem,direct ppo.steps=0
    run_sweep h200-8rank-plan-zero3 gpus=8 share_gpus=true zero=stage3 loader=zero3_init ppo.steps=0 ;;
esac
if [ -n "${OUT:-}" ]; then tar czf "$OUT/gpu_plan.tar.gz" bench/results; fi
