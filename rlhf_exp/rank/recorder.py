"""Per-rank stage events, appended to the job dir's events/rank<N>.jsonl and flushed as they happen.

Each stage: barrier (so every rank's window lines up and the watcher's node samples can be
assigned to one stage), reset the kernel's VmHWM and torch's CUDA peak, run, then read them
back. A stage that raises writes an `error` event with the traceback before the rank exits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist

from rlhf_exp.config.schema import FaultSettings
from rlhf_exp.jobdir import JobDir
from rlhf_exp.memory import gpu, gpu_history, heap, kernel
from rlhf_exp.records import Event, EventKind, RankMemoryNow, json_line

TIMEOUT_RE = re.compile(r"tim(ed|e)[ _-]?out", re.IGNORECASE)


class StageRecorder:
    def __init__(
        self,
        job_dir: JobDir,
        rank: int,
        device: torch.device,
        nvml_index: int | None = None,
        fault: FaultSettings | None = None,
        gpu_history: bool = False,
    ) -> None:
        self.rank = rank
        # profile_gpu_memory: one rank's allocation history per stage (the ranks' GPU work is alike)
        self.gpu_history = gpu_history and rank == 0 and gpu.cuda_active(device)
        self.fault = fault
        self.device = device
        self.nvml = gpu.Nvml() if device.type == "cuda" else None
        self.nvml_index = nvml_index
        self.job_dir = job_dir
        path = job_dir.rank_events_file(rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "a", buffering=1)  # line-buffered: a killed rank keeps every event

    def write(self, kind: EventKind, stage: str | None = None, **fields: Any) -> None:
        """Append one event (records.Event) and flush it: a rank killed next keeps it."""
        event = Event(rank=self.rank, pid=os.getpid(), t=time.time(), event=kind, stage=stage, **fields)
        self._fh.write(json_line(event))
        self._fh.flush()

    def memory(self) -> RankMemoryNow:
        """This rank's memory now: kernel figures in bytes, glibc's kept heap, plus CUDA/NVML where a GPU is used."""
        status = kernel.process_status()
        smaps = kernel.process_smaps()
        nvml_used = self.nvml.used_bytes(self.nvml_index) if self.nvml is not None and self.nvml_index is not None else None
        return RankMemoryNow(
            vmhwm=status.get("VmHWM", 0),
            rss=status.get("VmRSS", 0),
            pss_anon=smaps.get("Pss_Anon", 0),
            uss=kernel.uss_bytes(smaps),
            rss_file=status.get("RssFile", 0),
            rss_shmem=status.get("RssShmem", 0),
            rchar=kernel.read_chars(),
            heap_free=heap.free_bytes(),
            nvml_used=nvml_used,
            **gpu.cuda_stats(self.device),
        )

    def _write_error(self, stage: str, exc: BaseException, waiting: bool = False) -> None:
        message = f"{type(exc).__name__}: {exc}"
        self.write(
            "error",
            stage,
            error=message[:2000],
            # a collective that timed out names the rank that waited, not the one that hung
            timeout=bool(TIMEOUT_RE.search(message)),
            waiting=waiting,
            traceback=traceback.format_exc()[-8000:],
            memory=self.memory(),
        )

    @contextmanager
    def stage(self, name: str, sync: bool = True) -> Iterator[dict[str, Any]]:
        """Measure one stage; the yielded dict collects extra facts to store with its end event.

        The opening barrier is recorded too: a rank that times out there waited for a rank that hung.
        """
        if sync and dist.is_initialized():
            try:
                dist.barrier()
            except BaseException as exc:
                self._write_error(name, exc, waiting=True)
                raise
        kernel.reset_peak_rss()
        gpu.reset_cuda_peak(self.device)
        extra: dict[str, Any] = {}
        self.write("begin", name, memory=self.memory())
        allocated_at_begin = torch.cuda.memory_allocated(self.device) if self.gpu_history else 0
        if self.gpu_history:
            gpu_history.start(self.device)
        start = time.perf_counter()
        try:
            self._inject_fault(name)
            yield extra
        except BaseException as exc:
            self._write_error(name, exc)
            raise
        finally:
            if self.gpu_history:  # a stage that ran out of memory is the one whose peak matters most
                self._write_gpu_history(name, allocated_at_begin)
        self.write("end", name, duration_s=time.perf_counter() - start, facts=extra, memory=self.memory())

    def _write_gpu_history(self, stage: str, allocated_at_begin: int) -> None:
        try:
            line = {"stage": stage, **gpu_history.peak_sites(self.device, allocated_at_begin)}
        except Exception as exc:  # noqa: BLE001 - a diagnostic: the job goes on without it
            line = {"stage": stage, "error": f"{type(exc).__name__}: {exc}"[:500]}
        path = self.job_dir.gpu_memory_file(self.rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(json.dumps(line) + "\n")

    def _inject_fault(self, stage: str) -> None:
        f = self.fault
        if f is None or f.stage != stage or f.rank != self.rank:
            return
        if f.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if f.mode == "hang":  # as a rank stuck in I/O or a deadlock: only a timeout or a signal ends it
            while True:
                time.sleep(3600)
        if f.mode == "kill_watcher":  # as the OOM killer might pick the watcher during a long load
            os.kill(self.job_dir.read_watcher_pid(), signal.SIGKILL)
            while True:  # the stage goes on until the job guard stops the job, as a 13B load would
                time.sleep(3600)
        raise RuntimeError(f"injected fault in {stage} on rank {self.rank}")

    def close(self) -> None:
        self._fh.close()
