#!/usr/bin/env bash
# One H200: the restructured job path on a real GPU (tiny model; every stage, PPO, loaders, the report).
#   device run: bash bench/gpu_smoke.sh   (with .whl carried; see bench/README.md)
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD RLHF_EXP_CACHE=/tmp/rlhf_exp_ckpt PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext WANDB_MODE=disabled
OUT=${OUT:-/tmp/out}
python3 -c "import torch, transformers, deepspeed; print('gpus', torch.cuda.device_count(), 'torch', torch.__version__, 'transformers', transformers.__version__)"
echo "=== one GPU, default job (ZeRO-2, PPO step)"
python3 -m rlhf_exp gpus=1 device=cuda hydra.run.dir=/tmp/run1 2>&1 | tail -22
echo "=== 2 ranks sharing the GPU, three loaders, weights compared"
python3 -m rlhf_exp -m gpus=2 share_gpus=true device=cuda loader=naive,direct,rank0_broadcast verify_weights=true hydra.sweep.dir=/tmp/sweep 2>&1 | tail -12
for r in actor critic ref reward; do
  a=$(ls /tmp/sweep/*naive*/weights/$r.after_ppo.json); for l in direct rank0_broadcast; do
    cmp -s "$a" /tmp/sweep/*_${l}_*/weights/$r.after_ppo.json && echo "$r $l same as naive" || echo "$r $l DIFFERS"; done; done
echo "=== plan for a 7B pair on this GPU"
python3 -m rlhf_exp plan model=llama-7b device=cuda gpus=1 2>&1 | tail -8
cp /tmp/run1/result.json "$OUT/run1_result.json"; cp /tmp/sweep/report.html "$OUT/sweep_report.html"
for f in /tmp/sweep/*/result.json; do cp "$f" "$OUT/sweep_$(basename "$(dirname "$f")").json"; done
