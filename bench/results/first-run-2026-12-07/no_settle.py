"""python -m rlhf_exp with the settle after writing checkpoints turned off: what the node figures read without it."""

import runpy
import sys

import rlhf_exp.job.prepare as prepare

prepare.SETTLE_AFTER_WRITING_BYTES = 1 << 62
sys.argv[0] = "rlhf_exp"
runpy.run_module("rlhf_exp", run_name="__main__", alter_sys=True)
