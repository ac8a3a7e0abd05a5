"""Ctrl-C and SIGTERM stop what the user meant to stop: the running job (recorded as `interrupted`), the rest
of its sweep, and every process the job started.

The job process turns SIGTERM into the same exception as Ctrl-C outside the ranks' run (inside it, torch's
elastic agent and the job guard handle both and stop the ranks). Ranks die with their job process, also
when it is SIGKILLed (PR_SET_PDEATHSIG); the watcher ignores Ctrl-C and SIGTERM and stops with the job.
"""

from __future__ import annotations

import ctypes
import os
import signal

INTERRUPTED_EXIT = 130  # the shell's code for a process ended by Ctrl-C
PR_SET_PDEATHSIG = 1


def raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def stop_on_sigterm() -> None:
    """In the job (and sweep) process: SIGTERM interrupts as Ctrl-C does, so cleanup runs."""
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)


def die_with_parent() -> None:
    """In a rank: the kernel SIGKILLs it when the job process that started it dies, however it dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the elastic agent's own teardown still applies
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def exit_on_interrupt() -> None:
    """In a rank: Ctrl-C to the process group ends it at once, quietly; the job records the interruption."""
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(INTERRUPTED_EXIT))
