#!/usr/bin/env bash
# Submit one rlhf_exp job by hand; each SLURM task is one rank (the same path the rlhf_slurm launcher takes).
#   sbatch --nodes=1 --ntasks-per-node=8 --gpus-per-node=8 launchers/sbatch_rlhf_exp.sh loader=staggered model=llama-7b
# Adjust the #SBATCH defaults below (or override them on the sbatch line) for your cluster.
#SBATCH --job-name=rlhf_exp
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --mem=0
#SBATCH --time=01:00:00
#SBATCH --output=outputs/slurm/%j.out
set -euo pipefail
export RLHF_EXP_SLURM_TASKS=1   # rlhf_exp: this process is one rank, not a launcher of ranks
# --kill-on-bad-exit: one dead rank (OOM-killed, say) ends every rank at once instead of a hang
srun --kill-on-bad-exit=1 python -m rlhf_exp gpus="$SLURM_NTASKS" hydra.run.dir="outputs/slurm/$SLURM_JOB_ID" "$@"
