"""Reading safetensors files straight into tensors on a device, at the disk's and the copy engine's speed.

Each weight is allocated on the device in the engine dtype and filled chunk by chunk: worker threads
`pread` a chunk from the file into a page-locked host buffer (the kernel's copy out of the page cache, or
the disk's read; no mapping, so no file page enters the rank's RSS) and issue its host-to-device copy on the
worker's own CUDA stream, converting dtype on the device when the checkpoint's differs. Each worker owns two
buffers, so its next read overlaps its last copy. On a CPU device the chunks are read straight into the
destination (through a staging buffer when converting).

Host memory held while reading: threads x 2 x chunk bytes of pinned buffers; device transient: the same in
staging buffers when converting. Weights come out bit-identical to from_pretrained's (tests/unit, and
verify_weights on the GPU).
"""

from __future__ import annotations

import json
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

# safetensors' dtype names (the format's spec)
SAFETENSORS_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    start: int  # byte offset in the file
    end: int


def read_header(path: Path) -> list[TensorEntry]:
    """The tensors of a safetensors file, with absolute byte ranges, in file order."""
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    base = 8 + size
    entries = []
    for name, info in header.items():
        if name != "__metadata__":
            start, end = info["data_offsets"]
            entries.append(TensorEntry(name, SAFETENSORS_DTYPES[info["dtype"]], tuple(info["shape"]), base + start, base + end))
    return sorted(entries, key=lambda e: e.start)


@dataclass(frozen=True)
class Chunk:
    entry: TensorEntry
    first: int  # element range of the tensor this chunk fills
    count: int


def _chunks(entries: list[TensorEntry], chunk_bytes: int) -> list[Chunk]:
    out = []
    for entry in entries:
        per = max(1, chunk_bytes // entry.dtype.itemsize)
        total = (entry.end - entry.start) // entry.dtype.itemsize
        out += [Chunk(entry, first, min(per, total - first)) for first in range(0, total, per)]
    return out


def pread_into(fd: int, view: memoryview, offset: int) -> None:
    """Fill `view` from the file at `offset` (preadv may return short: loop until full; EOF is an error)."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n == 0:
            raise EOFError(f"safetensors file ended at byte {offset + done}")
        done += n


class _Worker:
    """One reading thread's buffers (two, alternating) and, on a GPU, its stream and copy-done events."""

    def __init__(self, device: torch.device, chunk_bytes: int, convert: bool) -> None:
        gpu = device.type == "cuda"
        self.buffers = [torch.empty(chunk_bytes, dtype=torch.uint8, pin_memory=gpu) for _ in range(2)]
        self.staging = [torch.empty(chunk_bytes, dtype=torch.uint8, device=device) for _ in range(2)] if gpu and convert else None
        self.stream = torch.cuda.Stream(device) if gpu else None
        self.done = [torch.cuda.Event() for _ in range(2)] if gpu else None
        self.turn = 0

    def fill(self, fd: int, chunk: Chunk, dest: torch.Tensor) -> None:
        """Read one chunk of `chunk.entry` from the file into dest (flat, engine dtype) at its element range."""
        src_dtype, size = chunk.entry.dtype, chunk.entry.dtype.itemsize
        nbytes = chunk.count * size
        offset = chunk.entry.start + chunk.first * size
        target = dest[chunk.first : chunk.first + chunk.count]
        if self.stream is None and dest.dtype == src_dtype:  # CPU, no conversion: read straight into the weight
            pread_into(fd, memoryview(target.view(torch.uint8).numpy()), offset)
            return
        slot = self.turn
        self.turn ^= 1
        if self.done is not None:
            self.done[slot].synchronize()  # this buffer's last copy has left it
        buf = self.buffers[slot][:nbytes]
        pread_into(fd, memoryview(buf.numpy()), offset)
        if self.stream is None:
            target.copy_(buf.view(src_dtype))
            return
        with torch.cuda.stream(self.stream):
            if dest.dtype == src_dtype:
                target.view(torch.uint8).copy_(buf, non_blocking=True)
            else:  # bytes to the device, then the dtype conversion there
                assert self.staging is not None
                stage = self.staging[slot][:nbytes]
                stage.copy_(buf, non_blocking=True)
                target.copy_(stage.view(src_dtype))
            self.done[slot].record(self.stream)  # type: ignore[index]

    def finish(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()


def read_safetensors(
    files: list[Path], device: torch.device, dtype: torch.dtype | None, threads: int, chunk_bytes: int
) -> dict[str, torch.Tensor]:
    """Every tensor of `files` on `device`, floating-point ones in `dtype` (None: as stored)."""
    entries = {f: read_header(f) for f in files}
    convert = False
    state: dict[str, torch.Tensor] = {}
    flat: dict[str, torch.Tensor] = {}
    for file_entries in entries.values():
        for e in file_entries:
            target = dtype if dtype is not None and e.dtype.is_floating_point else e.dtype
            convert |= target != e.dtype
            state[e.name] = torch.empty(e.shape, dtype=target, device=device)
            flat[e.name] = state[e.name].view(-1)
    chunk_bytes -= chunk_bytes % 8  # every element size divides it
    jobs = [(f, c) for f, file_entries in entries.items() for c in _chunks(file_entries, chunk_bytes)]
    threads = max(1, min(threads, len(jobs)))
    workers = [_Worker(device, chunk_bytes, convert) for _ in range(threads)]
    fds = {f: os.open(f, os.O_RDONLY) for f in files}
    try:

        def run(index: int) -> None:
            worker = workers[index]
            for f, chunk in jobs[index::threads]:  # interleaved: the threads read neighbouring chunks together
                worker.fill(fds[f], chunk, flat[chunk.entry.name])
            worker.finish()

        with ThreadPoolExecutor(max_workers=threads) as pool:
            for future in [pool.submit(run, i) for i in range(threads)]:
                future.result()
    finally:
        for fd in fds.values():
            os.close(fd)
    workers.clear()  # the buffers are freed here, not when the function returns
    release_pinned_cache()
    return state


def release_pinned_cache() -> None:
    """torch keeps freed pinned blocks cached for reuse (CachingHostAllocator): hand them back, so the staging
    buffers leave the rank's RSS once the weights are on the GPU. Absent on builds without CUDA (nothing pinned)."""
    empty = getattr(torch._C, "_host_emptyCache", None)
    if empty is not None and torch.cuda.is_available():
        empty()
