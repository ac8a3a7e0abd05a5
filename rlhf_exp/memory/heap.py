"""The C heap as glibc's malloc reports it: what a process freed but the allocator keeps (and the node counts).

glibc serves an allocation under its mmap threshold from an arena (one per thread that allocated) and keeps what
is freed there for reuse; the threshold itself rises to the size of each mmapped block that is freed (up to
32 MiB), so buffers allocated and freed over and over (ZeRO-3's gathers on CPU ranks) end up in the arenas.
"""

from __future__ import annotations

import ctypes


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    ]


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return None


_LIBC = _libc()
_MALLINFO2 = getattr(_LIBC, "mallinfo2", None)  # glibc >= 2.33
if _MALLINFO2 is not None:
    _MALLINFO2.restype = _Mallinfo2


def free_bytes() -> int | None:
    """Bytes free in the arenas, held by the allocator for reuse (mallinfo2's fordblks); None where not glibc >= 2.33."""
    return int(_MALLINFO2().fordblks) if _MALLINFO2 is not None else None


def release_freed_heap() -> None:
    """Hand freed heap back to the kernel: glibc keeps freed pages in its arenas, where the node still counts them as
    used until some later trim."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)
