# Sourced by the device lease scripts (gpu_speed.sh, gpu_ship.sh, gpu_ab.sh, gpu_twin_check.sh), from the repo root:
# the wheels the device lacks (.whl/, carried) installed into /tmp/site once per machine; bytecode cached, as an
# ordinary install has it (the device image sets PYTHONDONTWRITEBYTECODE and installs with --no-compile, so each
# process would compile torch's lazily imported modules from source); checkpoints under /tmp; W&B off; results kept
# in $KEEP (the device tool re-copies the tree at every call, deleting what a step wrote inside it).
# DRY=1 (a CPU rehearsal: PATH=$PWD/.venv/bin:$PATH) installs nothing. Sets SITE: the PYTHONPATH prefix of the wheels.
KEEP=/tmp/keep
if [ "${DRY:-0}" = 1 ]; then
  SITE=""
else
  [ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    || exit 1
  SITE=/tmp/site:
fi
mkdir -p $KEEP
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pycache RLHF_EXP_CACHE=/tmp/rlhf_exp_ckpt PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext \
  WANDB_MODE=disabled
