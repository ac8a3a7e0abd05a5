#!/usr/bin/env bash
# GPU truth on one H200 (issue 9), run through the `device` tool from the repo root:
#   bash bench/gpu_h200.sh one     # gpus=1, every loader, llama-1.3b actor + llama-350m critic
#   bash bench/gpu_h200.sh shared  # host-memory study: 8 ranks sharing the one GPU (share_gpus, gloo)
# Needs the wheels in .whl (deepspeed, hydra-core, omegaconf, antlr4, pydantic*, hjson): see bench/README.md.
# Results: bench/results/<name>/*.json and bench/RESULTS.md, tarred into $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD RLHF_EXP_CACHE=/tmp/rlhf_exp_ckpt PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext WANDB_MODE=disabled
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
free -g | head -2; nproc
python3 -c "import torch, deepspeed, transformers, peft; print('torch', torch.__version__, 'deepspeed', deepspeed.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)"
MODEL=${MODEL:-llama-1.3b}
case "${1:-one}" in
  one)
    python3 bench/loader_sweep.py --gpus 1 --model "$MODEL" --zero stage2 --device cuda \
      --loaders naive,staggered,low_mem,rank0_broadcast,direct --name h200-1gpu-zero2 lora=r128 "${@:2}"
    python3 bench/loader_sweep.py --gpus 1 --model "$MODEL" --zero stage3 --device cuda \
      --loaders zero3_init --name h200-1gpu-zero3 lora=r128 ;;
  shared)
    python3 bench/loader_sweep.py --gpus 8 --model "$MODEL" --zero stage2 --device cuda --share-gpus \
      --loaders "${LOADERS:-naive,staggered,low_mem,rank0_broadcast,direct}" --name h200-8rank-shared lora=r128 "${@:2}" ;;
esac
if [ -n "${OUT:-}" ]; then tar czf "$OUT/gpu_results.tar.gz" bench/results bench/RESULTS.md; fi
