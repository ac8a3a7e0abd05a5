"""A lent GPU machine: the libraries it lacks installed from carried wheels, and a run detached from the call.

The device image lacks deepspeed, hydra, pydantic, ... and has an older transformers: `.whl/` (carried) holds them
(bench/README.md). The first `python -m bench` there installs them into SITE once and re-executes itself with
them on PYTHONPATH. A machine goes back 30 s after a call, so a lease's runs go in one detached process
(`run --detach`), followed by calls that wait on it and pack its results (`follow --pack $OUT`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from bench import REPO

WHEELS = REPO / ".whl"
SITE = Path("/tmp/site")
KEEP = Path("/tmp/bench_keep")  # outside the tree: the device tool re-copies the tree at every call
LOG = KEEP / "bench.log"
PID = KEEP / "bench.pid"
NEEDED = ("deepspeed", "hydra", "omegaconf", "pydantic", "peft", "accelerate", "transformers", "submitit")
# without hydra-submitit-launcher, Hydra warns at every start that it cannot import the rlhf_slurm launcher plugin
TRANSFORMERS_AT_LEAST = (5, 24)


def libraries_missing() -> list[str]:
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if "transformers" not in missing:
        version = tuple(int(p) for p in importlib.metadata.version("transformers").split(".")[:2])
        if version < TRANSFORMERS_AT_LEAST:
            missing.append(f"transformers>={'.'.join(map(str, TRANSFORMERS_AT_LEAST))} (have {'.'.join(map(str, version))})")
    return missing


def ensure_libraries(argv: list[str]) -> None:
    """Install the carried wheels and re-exec when the app's libraries are missing; a clear error when no wheels."""
    missing = libraries_missing()
    if not missing:
        return
    if str(SITE) in os.environ.get("PYTHONPATH", "") or not list(WHEELS.glob("*.whl")):
        sys.exit(f"error: missing {', '.join(missing)}; valid: bash setup.sh (a venv), or wheels in {WHEELS} (bench/README.md)")
    wheels = sorted(WHEELS.glob("*.whl"))
    installed = SITE / ".carried_wheels"  # an earlier command of this lease installed these: no second pip
    if not installed.exists() or installed.read_text() != "\n".join(w.name for w in wheels):
        print(f"installing {len(wheels)} carried wheels into {SITE} (missing: {', '.join(missing)})", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir"]
        subprocess.run([*pip, "--upgrade", "--target", str(SITE), *map(str, wheels)], check=True)
        installed.write_text("\n".join(w.name for w in wheels))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SITE), str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    os.execv(sys.executable, [sys.executable, "-m", "bench", *argv])


def on_lent_machine() -> bool:
    """The carried wheels are in use: this is the lent GPU machine, not a checkout with its own venv."""
    return str(SITE) in os.environ.get("PYTHONPATH", "").split(os.pathsep)


def machine_environment() -> None:
    """Every job of the bench: W&B off, output unbuffered; on the lent machine bytecode cached (its image sets
    PYTHONDONTWRITEBYTECODE: every process would compile torch's lazily imported modules anew) and caches in /tmp."""
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.environ["PYTHONUNBUFFERED"] = "1"
    if on_lent_machine():
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ.setdefault("PYTHONPYCACHEPREFIX", "/tmp/pycache")
        os.environ.setdefault("RLHF_EXP_CACHE", "/tmp/rlhf_exp_ckpt")
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", "/tmp/torch_ext")


def detach(argv: list[str]) -> None:
    """This command again, in a new session (it outlives the call), its console in LOG; results under KEEP. A run
    detached while another is running queues behind it, so one lease's commands run in turn and one `follow`
    waits for them all."""
    KEEP.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "bench", *argv]
    if running():
        ahead = detached_pids()[-1]
        command = ["bash", "-c", f'while kill -0 {ahead} 2>/dev/null; do sleep 1; done; exec "$@"', "queued", *command]
    with open(LOG, "ab") as log:
        proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
    with open(PID, "a") as pids:
        pids.write(f"{proc.pid}\n")
    queued = f" (queued behind pid {ahead})" if command[0] == "bash" else ""
    print(f"started pid {proc.pid}{queued}; console: {LOG}; then: python3 -m bench follow --wait 540 --pack $OUT")


def detached_pids() -> list[int]:
    """Every run detached on this machine, in order (each later one queued behind the one before)."""
    return [int(p) for p in PID.read_text().split()] if PID.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def running() -> bool:
    """The last detached run is alive: it outlives every run queued ahead of it."""
    return any(alive(p) for p in detached_pids()[-1:])


def follow(wait_s: float, pack: Path | None, lines: int = 60) -> int:
    """Wait for the detached run (at most wait_s), print its console's end, pack what it kept so far."""
    deadline = time.monotonic() + wait_s
    while running() and time.monotonic() < deadline:
        time.sleep(2)
    if LOG.exists():
        print("\n".join(LOG.read_text(errors="replace").splitlines()[-lines:]))
    if not PID.exists():
        print(f"--- no detached run on this machine ({PID} is absent: a fresh machine, /tmp gone with the last one)")
        return 1
    print(f"--- the detached run: {'still running' if running() else 'finished'}")
    if pack:
        pack_results(KEEP / "results", pack)
    return 0


def stop() -> None:
    for pid in detached_pids():
        if alive(pid):
            os.killpg(pid, signal.SIGTERM)


def pack_results(results: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    target = into / "bench_results.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        if results.exists():
            tar.add(results, arcname="results")
        if LOG.exists():
            tar.add(LOG, arcname="results/bench.log")
    print(f"packed {results} into {target}")
