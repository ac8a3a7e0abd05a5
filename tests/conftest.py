"""Shared helpers: compose configs in-process (unit), run the real app as a subprocess into a tmp dir (e2e),
with one checkpoint cache per session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from node_noise import NodeNoise

REPO = Path(__file__).resolve().parents[1]


# Seconds each e2e file takes on a 2-core machine run alone (pytest --durations, CI 2026-12-05). The suite runs on two
# xdist workers (pyproject: -n 2 --dist loadscope): a file's tests stay on one worker (they share module fixtures),
# but the bench dry run's scenario groups (independent, ~2 min each, a test class each) are spread; the longest work starts
# first, so that none is left to run alone at the end.
FILE_SECONDS = {
    "test_families.py": 170,
    "test_readme_commands.py": 140,
    "test_loaders.py": 165,
    "test_reliability.py": 105,
    "test_slurm.py": 100,
    "test_bad_inputs.py": 65,
    "test_sweep_tracking.py": 60,
    "test_results_kept.py": 57,
    "test_plan.py": 50,
    "test_interrupts.py": 46,
    "test_end_to_end.py": 45,
    "test_ppo.py": 36,
    "test_wheel.py": 22,
    "test_report_browser.py": 60,
    "test_emulation.py": 40,
    "test_bench_dry_run.py": 120,  # per test: a group of scenarios each
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: -FILE_SECONDS.get(item.path.name, 0))  # stable: a file's tests keep their order


def compose_settings(*overrides: str) -> Any:
    """The validated settings of `python -m rlhf_exp <overrides>`, composed in-process."""
    from rlhf_exp.config.compose import compose_config
    from rlhf_exp.config.schema import validate

    return validate(compose_config(list(overrides)))


@pytest.fixture(scope="session")
def ckpt_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Generated checkpoints and the rank-footprint probe, shared by every test of the session and by both xdist
    workers (generation is deterministic and takes the cache's lock; the probe's figure is written whole)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one process: its own temp dir
        return tmp_path_factory.mktemp("rlhf_exp_cache")
    shared = tmp_path_factory.getbasetemp().parent / "rlhf_exp_cache"  # the session's root, above each worker's
    shared.mkdir(exist_ok=True)
    return shared


def deepspeed_chat_stage2(tmp_path: Path) -> Path:
    """A ds_config as DeepSpeed-Chat's get_train_ds_config(stage=2, dtype=bf16) writes it (utils/ds_utils.py)."""
    zero = {"stage": 2, "overlap_comm": True, "offload_param": {"device": "none"}, "offload_optimizer": {"device": "none"}}
    zero |= {"stage3_param_persistence_threshold": 1e4, "stage3_max_live_parameters": 3e7}
    zero |= {"stage3_prefetch_bucket_size": 3e7, "memory_efficient_linear": False}
    config = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "steps_per_print": 10, "zero_optimization": zero}
    config |= {"bf16": {"enabled": True}, "gradient_clipping": 1.0, "prescale_gradients": False}
    config |= {"wall_clock_breakdown": False, "hybrid_engine": {"enabled": False, "max_out_tokens": 512}}
    path = tmp_path / "ds_chat_stage2.json"
    path.write_text(json.dumps(config))
    return path


def app_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "RLHF_EXP_CACHE": str(cache), "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": "0"}


# The node's used memory above the baseline taken before ranks start moves by up to ~0.5 GiB on a small shared box
# (plan/compare.py), more than a tiny CPU job's whole rise: a tiny job's stage can read below its baseline. Seen in
# CI: a PPO stage at -0.005 GiB while its rank held 0.53 GiB; baselines of one sweep's jobs 0.78-1.33 GiB.
NODE_BASELINE_DRIFT_GIB = 0.5


def node_allowance(result: dict[str, Any]) -> float:
    """How far a node-wide figure of `result` may stray for reasons outside the job: the baseline's drift, or the
    machine's noise measured beside the job (tests/node_noise.py), whichever is larger."""
    return max(NODE_BASELINE_DRIFT_GIB, NODE_NOISE.get(str(result.get("job_dir")), 0.0))


@pytest.fixture(scope="module")
def memory_stress() -> Iterator[None]:
    """A neighbour allocating and freeing ~1 GiB in a loop (tests/memory_stress.py) for a module of memory-figure
    tests: their claims must hold on a shared machine."""
    helper = subprocess.Popen([sys.executable, str(Path(__file__).with_name("memory_stress.py")), "1.0"])
    try:
        yield
    finally:
        helper.kill()
        helper.wait()


def assert_quiet_console(console: str) -> None:
    """A stop (watchdog, timeout, a signal, a failing rank) ends in the job's own lines: no traceback and no
    library's logging of the shutdown on the console (the job's log keeps those)."""
    for noise in ("Traceback", "--- Logging error ---", "death signal", "closing signal"):
        assert noise not in console, console[-2000:]


RunApp = Callable[..., tuple[subprocess.CompletedProcess, dict[str, Any] | None]]


@pytest.fixture
def run_app(tmp_path: Path, ckpt_cache: Path) -> RunApp:
    """run_app(*overrides) -> (process, result.json or None) for one `python -m rlhf_exp` job."""

    def _run(*overrides: str, timeout: int = 900) -> tuple[subprocess.CompletedProcess, dict[str, Any] | None]:
        run_dir = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
        cmd = [sys.executable, "-m", "rlhf_exp", f"hydra.run.dir={run_dir}", *overrides]
        with NodeNoise() as noise:
            proc = subprocess.run(cmd, cwd=tmp_path, env=app_env(ckpt_cache), capture_output=True, text=True, timeout=timeout)
        result_file = run_dir / "result.json"
        return proc, with_noise(json.loads(result_file.read_text()), noise) if result_file.exists() else None

    return _run


def wait_for_stage(job_root: Path, stage: str, timeout_s: float = 240, proc: subprocess.Popen | None = None) -> Path:
    """The job dir (under job_root) whose rank 0 has begun `stage`; fails at once if `proc` (the app) has ended."""
    deadline = time.time() + timeout_s
    while time.time() < deadline and (proc is None or proc.poll() is None):
        for events in job_root.glob("**/events/rank0.jsonl"):
            if any(json.loads(line).get("stage") == stage for line in events.read_text().splitlines() if line.strip()):
                return events.parent.parent
        time.sleep(0.3)
    ended = "" if proc is None or proc.poll() is None else f" (the app ended with {proc.returncode})"
    raise AssertionError(f"no job reached {stage}{ended}")


RunSweep = Callable[..., tuple[subprocess.CompletedProcess, list[dict[str, Any]]]]


def run_sweep_in(
    sweep_dir: Path, cache: Path, *overrides: str, timeout: int = 1800, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, list]:
    """`python -m rlhf_exp -m ...` into sweep_dir; returns the process and every job's result.json, in job order."""
    cmd = [sys.executable, "-m", "rlhf_exp", "-m", f"hydra.sweep.dir={sweep_dir}", *overrides]
    env = {**app_env(cache), **(env or {})}
    with NodeNoise() as noise:
        proc = subprocess.run(cmd, cwd=sweep_dir.parent, env=env, capture_output=True, text=True, timeout=timeout)
    files = sorted(sweep_dir.glob("*/result.json"), key=lambda p: int(p.parent.name.split("_")[0]))
    return proc, [with_noise(json.loads(f.read_text()), noise) for f in files]


NODE_NOISE: dict[str, float] = {}  # job_dir -> the machine's noise measured beside that job (tests/node_noise.py)


def with_noise(result: dict[str, Any], noise: NodeNoise) -> dict[str, Any]:
    """The result as the app wrote it; the test's own measurement is kept beside it, by job dir."""
    NODE_NOISE[str(result.get("job_dir"))] = round(noise.gib, 4)
    return result


def assert_plan_holds(result: dict[str, Any]) -> None:
    """The plan stored beside the measurement is within the stated tolerance (rlhf_exp/plan/compare.py) at every
    measured stage: each rank's peak rise, the node's peak (plus the machine's noise measured beside the job) and
    GPU memory."""
    from rlhf_exp.plan.compare import compare

    rows = compare(result, node_noise_gib=NODE_NOISE.get(str(result.get("job_dir")), 0.0))
    assert rows, "no plan beside the measurement"
    for row in rows:
        assert row["ok"], (result["loader"], result["gpus"], row)
