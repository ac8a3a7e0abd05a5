"""glibc's arenas: what a process freed and the allocator keeps (memory/heap.py), read from the allocator itself."""

from __future__ import annotations

import pytest

from rlhf_exp.memory import heap


def test_the_arenas_keep_what_was_freed_below_the_mmap_threshold_and_report_it() -> None:
    before = heap.free_bytes()
    if before is None:
        pytest.skip("not glibc >= 2.33")
    blocks = [bytearray(64 << 10) for _ in range(1024)]  # 64 MiB in blocks glibc serves from its arena, not mmap
    top = bytearray(64 << 10)  # a live block above them: the arena cannot shrink under it
    del blocks
    kept = heap.free_bytes() - before
    assert kept >= 60 << 20
    del top
