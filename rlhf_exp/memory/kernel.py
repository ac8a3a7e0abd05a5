"""Host memory as the kernel reports it: per process (/proc/PID) and node-wide (meminfo, cgroup).

Why several figures (README: "Which figure to trust"): RSS double-counts shared page-cache pages (mmap'd
checkpoints), so the private cost of a rank is Pss_Anon; the exact per-process peak is VmHWM,
which a rank resets at each stage by writing 5 to /proc/self/clear_refs. Node-wide truth is
MemTotal - MemAvailable and the cgroup's own usage counter.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path


def read_kib_fields(path: str, wanted: tuple[str, ...] | None = None) -> dict[str, int]:
    """Parse 'Name:   123 kB' lines into bytes for the wanted names, or every field counted in kB (missing ones are
    absent)."""
    out: dict[str, int] = {}
    try:
        with open(path) as fh:
            for line in fh:
                name, _, rest = line.partition(":")
                fields = rest.split()  # empty for some status lines ("Groups:")
                if (name in wanted) if wanted is not None else fields[1:] == ["kB"]:
                    out[name] = int(fields[0]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return out


def process_status(pid: int | str = "self") -> dict[str, int]:
    """VmHWM (peak RSS since last reset), VmRSS, RssFile (file-backed pages, e.g. a mapped checkpoint) and RssShmem
    (shared memory: /dev/shm segments such as NCCL's shm transport; counted in the node's used memory), bytes."""
    return read_kib_fields(f"/proc/{pid}/status", ("VmHWM", "VmRSS", "RssFile", "RssShmem"))


def read_chars(pid: int | str = "self") -> int:
    """Bytes this process has read through read() syscalls (rchar): a private checkpoint read shows here."""
    try:
        with open(f"/proc/{pid}/io") as fh:
            for line in fh:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def process_smaps(pid: int | str = "self") -> dict[str, int]:
    """Rss, Pss, Pss_Anon, Pss_File, Private_* from smaps_rollup in bytes."""
    fields = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Private_Clean", "Private_Dirty", "Shared_Clean")
    return read_kib_fields(f"/proc/{pid}/smaps_rollup", fields)


def uss_bytes(smaps: dict[str, int]) -> int:
    """Unique set size: pages mapped by this process only (what psutil calls uss)."""
    return smaps.get("Private_Clean", 0) + smaps.get("Private_Dirty", 0)


def reset_peak_rss(pid: int | str = "self") -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0). False where the kernel refuses."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


BALLOON_DRIVER = Path("/sys/bus/virtio/drivers/virtio_balloon")
DEFLATE_ON_OOM_BIT = 2  # VIRTIO_BALLOON_F_DEFLATE_ON_OOM
REPORTING_BIT = 5  # VIRTIO_BALLOON_F_REPORTING: free pages handed back to the host


@functools.cache
def balloon_counts_as_used(driver: Path = BALLOON_DRIVER) -> bool:
    """Whether a virtual machine's balloon holds pages inside MemTotal as used memory. With deflate-on-OOM the
    kernel keeps inflated pages in MemTotal (without it they leave MemTotal), though the guest gets them back on
    demand. Whether a host inflates it during a job is not known: on the 2-core CI box (Firecracker, deflate-on-OOM
    and free page reporting) Balloon stayed 0 for 30 s after a 14 GiB free (2026-12-07); the freed memory went back
    to the host by free page reporting instead, which moves no meminfo field."""
    return any(len(bits) > DEFLATE_ON_OOM_BIT and bits[DEFLATE_ON_OOM_BIT] == "1" for bits in balloon_features(driver))


def balloon_features(driver: Path = BALLOON_DRIVER) -> list[str]:
    """Each virtio balloon's feature bits, one character per bit, bit 0 first (none outside a VM)."""
    return [features.read_text().strip() for features in driver.glob("virtio*/features")]


def free_page_reporting(driver: Path = BALLOON_DRIVER) -> bool:
    """Whether this VM hands freed pages back to its host (the next first touch of them faults there again)."""
    return any(len(bits) > REPORTING_BIT and bits[REPORTING_BIT] == "1" for bits in balloon_features(driver))


def node_used_bytes() -> int:
    """Node-wide memory in use as the kernel sees it: MemTotal - MemAvailable, less what a deflate-on-OOM balloon
    holds (the hypervisor's, given back on demand: not the job's, nor out of its reach). The watchdog counts the
    balloon as used (MemInfo): until it deflates, those pages are not there to allocate."""
    return node_used_of(read_kib_fields("/proc/meminfo", ("MemTotal", "MemAvailable", "Balloon")))


def node_used_of(meminfo: dict[str, int]) -> int:
    """node_used_bytes from fields already read (bytes): MemTotal, MemAvailable and, where there is one, Balloon."""
    balloon = meminfo.get("Balloon", 0) if balloon_counts_as_used() else 0
    return meminfo["MemTotal"] - meminfo["MemAvailable"] - balloon


def meminfo_bytes() -> dict[str, int]:
    """Every /proc/meminfo field counted in kB, as bytes: what moved on the node besides the job's own processes
    (page cache, slab, page tables, a VM's balloon) when the node figure moves without them."""
    return read_kib_fields("/proc/meminfo")


_PCP_COUNT = re.compile(r"^\s+count:\s+(\d+)", re.M)


def percpu_free_bytes(zoneinfo: Path = Path("/proc/zoneinfo")) -> int:
    """Free pages held on the per-CPU lists (/proc/zoneinfo's pagesets): the kernel counts them in neither MemFree nor
    MemAvailable, so they read as used. Since Linux 6.7 a CPU that frees much memory keeps up to GiBs there, and the
    lists shrink over a minute or two: after the bench wrote a 3.1 GiB checkpoint here the node's used memory fell
    0.81 GiB in 80 s, exactly as these lists drained (bench/results/settle-2026-12-07). 0 where unreadable."""
    try:
        text = zoneinfo.read_text()
    except OSError:
        return 0
    return sum(int(n) for n in _PCP_COUNT.findall(text)) * os.sysconf("SC_PAGE_SIZE")


PERCPU_FREE_LISTS = "PerCpuFreeLists"  # percpu_free_bytes, beside /proc/meminfo's own fields in a meminfo_snapshot


def meminfo_snapshot() -> dict[str, int]:
    """Every /proc/meminfo field (meminfo_bytes) and the per-CPU free lists (PERCPU_FREE_LISTS): the free pages that
    MemAvailable leaves out, so that a node figure moved by their filling or draining says so."""
    return {**meminfo_bytes(), PERCPU_FREE_LISTS: percpu_free_bytes()}


def node_total_bytes() -> int:
    return read_kib_fields("/proc/meminfo", ("MemTotal",))["MemTotal"]


class MemInfo:
    """MemTotal - MemAvailable for a tight loop (the watchdog's poll): /proc/meminfo kept open and read with one
    pread. A balloon's pages count as used here (node_used_bytes leaves them out): the watchdog must beat the kernel
    with the memory there is now."""

    def __init__(self) -> None:
        self.fd = os.open("/proc/meminfo", os.O_RDONLY)

    def used_bytes(self) -> int:
        text = os.pread(self.fd, 8192, 0)
        total = int(_MEMTOTAL.search(text).group(1))  # type: ignore[union-attr]
        available = int(_MEMAVAILABLE.search(text).group(1))  # type: ignore[union-attr]
        return (total - available) * 1024

    def close(self) -> None:
        os.close(self.fd)


_MEMTOTAL = re.compile(rb"^MemTotal:\s+(\d+)", re.M)
_MEMAVAILABLE = re.compile(rb"^MemAvailable:\s+(\d+)", re.M)


def oom_kill_count() -> int | None:
    """Processes the kernel's OOM killer has killed on this node since boot (/proc/vmstat oom_kill, Linux >= 4.13)."""
    try:
        with open("/proc/vmstat") as fh:
            for line in fh:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cgroup_dir() -> tuple[Path, int] | None:
    """This process's memory cgroup directory and cgroup version (1 or 2), if mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    root = Path("/sys/fs/cgroup")
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):  # v1 memory hierarchy
            base = root / "memory"
            for cand in (base / rel.lstrip("/"), base):  # namespaced mounts show the cgroup at the root
                if (cand / "memory.usage_in_bytes").exists():
                    return cand, 1
    for line in lines:
        if line.startswith("0::"):
            rel = line[3:].lstrip("/")
            for cand in (root / rel, root):
                if (cand / "memory.current").exists():
                    return cand, 2
    return None


class CgroupMemory:
    """Reads the current usage and kernel high-water mark of this process's memory cgroup."""

    def __init__(self) -> None:
        found = cgroup_dir()
        self.path, self.version = found if found else (None, 0)

    @property
    def available(self) -> bool:
        return self.path is not None

    def _read(self, name: str) -> int | None:
        if self.path is None:
            return None
        try:
            return int((self.path / name).read_text().split()[0])
        except (OSError, ValueError):
            return None

    def usage_bytes(self) -> int | None:
        return self._read("memory.usage_in_bytes" if self.version == 1 else "memory.current")

    def peak_bytes(self) -> int | None:
        return self._read("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")

    def reset_peak(self) -> bool:
        """Reset the cgroup high-water mark (v1: write 0; v2: any write, kernel >= 6.12)."""
        if self.path is None:
            return False
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            (self.path / name).write_text("0")
            return True
        except OSError:
            return False

    def describe(self) -> str:
        return f"cgroup v{self.version} at {self.path}" if self.path else "no memory cgroup"
