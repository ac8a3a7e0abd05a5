#!/usr/bin/env bash
# After bench/gpu_speed.sh in the same lease (its checkpoints and site in /tmp): the in-flight read (this tree) against
# the last landed code (.before/, 39ce49e), `direct` on the llama-7b pair, alternated three times; results to /tmp/keep.
#   device run (carry .whl .before .today): bash bench/gpu_ab.sh; bash bench/gpu_speed.sh pack
set -uo pipefail
KEEP=/tmp/keep
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pycache
export RLHF_EXP_CACHE=/tmp/rlhf_exp_ckpt PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext WANDB_MODE=disabled
COMMON="model=llama-7b device=cuda lora=r128 plan.fit_check=false job_timeout_s=420"
run() {  # tree, name
  (cd "$1" && PYTHONPATH=/tmp/site:$PWD python3 bench/time_to_engine.py --results $KEEP --name "$2" --no-limits \
    --loaders direct $COMMON 2>&1 | grep -E "^\| direct")
  python3 -c "import json; r = json.load(open('$KEEP/$2/direct.json')); print('$2 wall_s', r['wall_s'])"
}
for i in 1 2 3; do
  run .before h200-ab-before-$i
  run . h200-ab-after-$i
done
