#!/usr/bin/env bash
# Submit one rlhf_exp job by hand: one SLURM task per node, each the node's job process (the same path the
# rlhf_slurm launcher takes), which starts that node's ranks, watcher and guard.
#   sbatch --nodes=2 --gpus-per-node=8 launchers/sbatch_rlhf_exp.sh loader=staggered model=llama-7b
# Adjust the #SBATCH defaults below (or override them on the sbatch line) for your cluster.
#SBATCH --job-name=rlhf_exp
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --mem=0
#SBATCH --time=01:00:00
#SBATCH --output=rlhf_exp-%j.out
# (the log lands in the directory sbatch was run from, which exists; the job's records go to outputs/slurm/<job id>)
set -euo pipefail
export RLHF_EXP_SLURM_NODE_TASK=1   # rlhf_exp: this process is one node's job process (rlhf_exp/job/placement.py)
export SUBMITIT_EXECUTOR=slurm      # submitit (the node's place in the job) reads SLURM's variables only with it
# the project's venv (bash setup.sh) in the directory sbatch was run from, or RLHF_EXP_PYTHON
python=${RLHF_EXP_PYTHON:-$SLURM_SUBMIT_DIR/.venv/bin/python}
[ -x "$python" ] || { echo "error: no $python (run bash setup.sh there, or set RLHF_EXP_PYTHON)" >&2; exit 2; }
gpus=$(( SLURM_JOB_NUM_NODES * ${SLURM_GPUS_PER_NODE:-8} ))
mkdir -p outputs/slurm
# --kill-on-bad-exit: one dead node task (OOM-killed, say) ends the others at once instead of a hang
srun --kill-on-bad-exit=1 --ntasks-per-node=1 "$python" -m rlhf_exp gpus="$gpus" hydra.run.dir="outputs/slurm/$SLURM_JOB_ID" "$@"
