"""The kernel's own figures move as memory is really allocated and freed."""

from __future__ import annotations

import os
from pathlib import Path

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
        # the counter is the whole cgroup's: the suite's other worker moves it too (once by -440 MiB between two
        # reads), so the 200 MiB block must show above the readings on both sides of it in one of a few tries
        rises = []
        for _ in range(5):
            before = cgroup.usage_bytes()
            block = np.ones(200 * MIB, dtype=np.uint8)
            during = cgroup.usage_bytes()
            del block
            rises.append(during - max(before, cgroup.usage_bytes()))
            if rises[-1] >= 150 * MIB:
                break
        assert max(rises) >= 150 * MIB, rises


def test_the_pinned_pool_is_read_under_either_name_torch_gave_it() -> None:
    """torch <= 2.12 calls the pool (blocks in use and cached) reserved_bytes; 2.13 renamed it allocated_bytes and
    calls the bytes in use active_bytes. The figure is the pool either way."""
    from rlhf_exp.memory.gpu import pinned_pool

    blocks = {"num_host_alloc": 5, "num_host_free": 1}  # cudaHostAlloc and cudaFreeHost calls: 4 blocks in the pool
    older = {"allocated_bytes.current": 1 * MIB, "reserved_bytes.current": 64 * MIB, "reserved_bytes.peak": 96 * MIB}
    newer = {"active_bytes.current": 1 * MIB, "allocated_bytes.current": 64 * MIB, "allocated_bytes.peak": 96 * MIB}
    for stats in (older, newer):
        want = {"cuda_pinned": 64 * MIB, "cuda_peak_pinned": 96 * MIB, "cuda_pinned_blocks": 4}
        assert pinned_pool({**stats, **blocks}) == want
    assert pinned_pool({}) == {"cuda_pinned": 0, "cuda_peak_pinned": 0, "cuda_pinned_blocks": 0}  # no pinned block yet


def write_balloon(root: Path, features: str) -> Path:
    """A balloon device's sysfs folder as the virtio driver lays it out."""
    device = root / "virtio0"
    device.mkdir(parents=True)
    (device / "features").write_text(features + "\n")
    return root


def test_a_balloon_counts_as_used_only_where_it_deflates_on_demand(tmp_path: Path) -> None:
    """Feature bit 2 (deflate-on-OOM) keeps inflated pages in MemTotal as used; without it they leave MemTotal."""
    check = kernel_memory.balloon_counts_as_used.__wrapped__  # uncached
    assert check(write_balloon(tmp_path / "fc", "0110010100000000"))  # a Firecracker guest: stats, deflate-on-OOM, reporting
    assert not check(write_balloon(tmp_path / "plain", "0100010100000000"))
    assert not check(tmp_path / "no-balloon")


def test_free_page_reporting_is_read_from_the_balloons_feature_bits(tmp_path: Path) -> None:
    assert kernel_memory.free_page_reporting(write_balloon(tmp_path / "fc", "0110010100000000"))  # bit 5
    assert not kernel_memory.free_page_reporting(write_balloon(tmp_path / "none", "0110000100000000"))
    assert not kernel_memory.free_page_reporting(tmp_path / "no-balloon")


def test_the_node_figure_leaves_out_what_this_machines_balloon_holds() -> None:
    info = kernel_memory.read_kib_fields("/proc/meminfo", ("MemTotal", "MemAvailable", "Balloon"))
    held = info.get("Balloon", 0) if kernel_memory.balloon_counts_as_used() else 0
    expected = info["MemTotal"] - info["MemAvailable"] - held
    assert abs(kernel_memory.node_used_bytes() - expected) < 200 * MIB  # the other worker moves the node meanwhile


def test_the_per_cpu_free_lists_are_summed_over_every_zone_and_cpu(tmp_path: Path) -> None:
    zoneinfo = tmp_path / "zoneinfo"
    zoneinfo.write_text(
        "Node 0, zone    DMA32\n  pages free     1000\n  pagesets\n    cpu: 0\n              count: 30\n"
        "              high:  100\n    cpu: 1\n              count: 12\n              high:  100\n"
        "Node 0, zone   Normal\n  pages free     5000\n  pagesets\n    cpu: 0\n              count: 258\n"
    )
    page = os.sysconf("SC_PAGE_SIZE")
    assert kernel_memory.percpu_free_bytes(zoneinfo) == (30 + 12 + 258) * page
    assert kernel_memory.percpu_free_bytes(tmp_path / "absent") == 0
    assert kernel_memory.percpu_free_bytes() >= 0  # this machine's own


def test_a_meminfo_snapshot_carries_the_per_cpu_free_lists_beside_meminfo() -> None:
    snapshot = kernel_memory.meminfo_snapshot()
    assert snapshot[kernel_memory.PERCPU_FREE_LISTS] >= 0 and snapshot["MemTotal"] == kernel_memory.node_total_bytes()
    assert kernel_memory.node_used_of(snapshot) > 0  # the node figure reads from the same snapshot
