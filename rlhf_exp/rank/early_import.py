"""DeepSpeed's one-time compiler import, started when the rank starts instead of inside the first engine's init.

deepspeed.initialize checks a ZeRO engine's optimizer with is_zero_supported_optimizer (runtime/zero/utils.py),
which the first time imports DeepSpeed's Muon optimizer, whose @torch.compile decorators import torch._dynamo and
torch._inductor: 1.2 s of the first ZeRO init stage on the H200 host, 1.7 s on 2 cores (bench/read_pieces.py).
Imported in a thread from the rank's start, it runs while the main thread waits on the GPU, the process group and
the first checkpoint read; the rank joins it before its first deepspeed.initialize, so the engine sees the same
modules it would have imported itself.
"""

from __future__ import annotations

import importlib
import threading

ZERO_FIRST_IMPORT = "deepspeed.runtime.zero.muon.muon_optimizer"


class EarlyImport:
    """`module` imported in a background thread from construction on; `wait()` before anything needs it."""

    def __init__(self, module: str) -> None:
        self.module = module
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"import {module}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            importlib.import_module(self.module)
        except BaseException as exc:  # raised again by wait(), in the rank's main thread
            self._error = exc

    def wait(self) -> None:
        self._thread.join()
        if isinstance(self._error, ImportError):  # as DeepSpeed treats it: Muon is optional
            return
        if self._error is not None:
            raise self._error
