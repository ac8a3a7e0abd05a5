"""The kernel's own figures move as memory is really allocated and freed."""

from __future__ import annotations

import numpy as np

from rlhf_exp.memory import kernel as kernel_memory

MIB = 1024**2


def test_vmhwm_rises_with_allocation_and_resets() -> None:
    assert kernel_memory.reset_peak_rss()
    before = kernel_memory.process_status()["VmHWM"]
    block = np.ones(300 * MIB, dtype=np.uint8)  # touched pages: real resident memory
    peak = kernel_memory.process_status()["VmHWM"]
    assert peak - before >= 280 * MIB
    assert kernel_memory.process_smaps()["Pss_Anon"] >= 280 * MIB
    del block
    assert kernel_memory.reset_peak_rss()
    assert kernel_memory.process_status()["VmHWM"] < peak - 250 * MIB


def test_node_and_cgroup_figures_are_live() -> None:
    used = kernel_memory.node_used_bytes()
    assert 0 < used < kernel_memory.node_total_bytes()
    cgroup = kernel_memory.CgroupMemory()
    if cgroup.available:
        before = cgroup.usage_bytes()
        block = np.ones(200 * MIB, dtype=np.uint8)
        assert cgroup.usage_bytes() - before >= 150 * MIB
        del block
