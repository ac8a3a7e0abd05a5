"""One row per job of a sweep: what the end-of-sweep table and the report's summary show."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from rlhf_exp.config.stages import is_load_stage
from rlhf_exp.jobdir import Failure
from rlhf_exp.plan.terms import plan_stages


def engine_build_s(result: dict[str, Any]) -> float:
    """Seconds in the load and init stages: the time to build the four engines."""
    return sum(
        s.get("duration_s") or 0 for s in result.get("stages", []) if is_load_stage(s["stage"]) or s["stage"].endswith(".init")
    )


_MISSING = object()


@functools.lru_cache(maxsize=1024)
def _hydra_yaml(path: str, mtime_ns: int) -> Any:
    """A file of the job's .hydra dir, parsed once per version (a report reads each job's several times)."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return None


def _hydra_file(result: dict[str, Any], name: str) -> Any:
    path = Path(str(result.get("job_dir"))) / ".hydra" / name
    try:
        return _hydra_yaml(str(path), path.stat().st_mtime_ns)
    except OSError:
        return None


def job_overrides(result: dict[str, Any]) -> dict[str, str]:
    """The overrides the job ran with, as Hydra recorded them in its dir (.hydra/overrides.yaml): key -> value."""
    items = _hydra_file(result, "overrides.yaml") or []
    pairs = (str(item).lstrip("+~").split("=", 1) for item in items if "=" in str(item))
    return {key: value for key, value in pairs if not key.startswith("hydra.")}


def job_value(result: dict[str, Any], key: str) -> str:
    """The job's value of `key`: its override; else the config group Hydra chose (.hydra/hydra.yaml); else the value in
    its resolved config. Jobs of different sweeps in one dir override different keys: each still has a value."""
    overrides = job_overrides(result)
    if key in overrides:
        return overrides[key]
    choices = (((_hydra_file(result, "hydra.yaml") or {}).get("hydra") or {}).get("runtime") or {}).get("choices") or {}
    if key in choices:
        return str(choices[key])
    node: Any = result.get("config") or {}
    for part in key.split("."):
        node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
    if node is _MISSING or isinstance(node, (dict, list)):
        return "-"
    return "null" if node is None else str(node).lower() if isinstance(node, bool) else str(node)


def swept_keys(results: list[dict[str, Any]]) -> list[str]:
    """The override keys whose value differs between the jobs: what names each job of a sweep (or of several sweeps
    into one dir)."""
    keys = sorted({k for r in results for k in job_overrides(r)})
    return [k for k in keys if len({job_value(r, k) for r in results}) > 1]


def config_label(result: dict[str, Any], keys: list[str], sep: str = " ") -> str:
    """The job by the swept keys (`keys`), e.g. "gpus=2 loader=naive zero=stage3"; its dir name when none is swept."""
    return sep.join(f"{k}={job_value(result, k)}" for k in keys) or _job_name(result)


def comparison_row(result: dict[str, Any], keys: list[str] | None = None) -> dict[str, Any]:
    """The row of one job; `keys`: the sweep's swept keys (swept_keys), which label it."""
    config = result.get("config") or {}
    stages = result.get("stages", [])
    peak = max(stages, key=lambda s: s.get("node_peak_gib") or 0, default={})
    gpu = [s.get("gpu_cuda_peak_allocated_gib") for s in stages if s.get("gpu_cuda_peak_allocated_gib") is not None]
    planned = max((st.node_peak_gib for st in plan_stages(result.get("plan"))), default=None)
    failure = Failure.from_dict(result.get("failure"))
    return {
        "job": _job_name(result),
        "config": config_label(result, keys or []),
        "gpus": result.get("gpus", config.get("gpus")),
        "loader": result.get("loader", (config.get("loader") or {}).get("name")),
        "zero": "/".join(str(z) for z in (result.get("zero_stages") or {}).values()) or None,
        "status": result.get("status"),
        "node_peak_gib": result.get("node_peak_gib"),
        "peak_stage": peak.get("stage"),
        "gpu_peak_gib": max(gpu) if gpu else None,
        "build_s": round(engine_build_s(result), 2) if stages else None,
        "planned_peak_gib": planned,
        "failed_at": failure.stage if failure and result.get("status") != "completed" else None,
        "emulated": emulation_label(result),
    }


COLUMNS = (  # (key, header, what it means: the console table's legend); every job named by its swept keys
    ("job", "job", "the job's number in the sweep: its dir under the sweep dir begins with it"),
    ("config", "config", "the keys the sweep varied"),
    ("zero", "ZeRO", "ZeRO stage of actor/ref/critic/reward"),
    ("status", "status", ""),
    ("node_peak_gib", "node peak", "GiB of the node's used memory above the level before ranks started, at its peak"),
    ("peak_stage", "at", "the stage of that peak"),
    ("gpu_peak_gib", "GPU peak", "GiB torch allocated at most on a rank"),
    ("build_s", "build s", "seconds in the load and init stages: the time to build the four engines"),
    ("planned_peak_gib", "planned", "the plan's node peak, GiB"),
    ("failed_at", "failed at", "the stage a failed job stopped in"),
    ("emulated", "emulated", "machine.emulate: the target's caps the job ran under, host GiB per node and GPU GiB per rank"),
)
CONSOLE_KEYS = ("job", "config", "zero", "status", "node_peak_gib", "peak_stage", "gpu_peak_gib", "build_s", "planned_peak_gib")


def emulation_label(result: dict[str, Any]) -> str | None:
    """machine.emulate's caps in a few words, e.g. "a100-80g-8x: host 450.0 (cgroup), GPU 80.0"; None otherwise."""
    emulation = result.get("emulation")
    if not emulation:
        return None
    host, gpu = emulation.get("host"), emulation.get("gpu")
    parts = [f"host {host['cap_gib']} ({host['by'].split(' ')[0]})"] if host else []
    parts += [f"GPU {gpu['cap_gib']}" + ("" if str(gpu.get("by", "")).startswith("torch") else " (not enforced)")] if gpu else []
    return f"{emulation.get('machine')}: {', '.join(parts)}"


def _job_name(result: dict[str, Any]) -> str:
    return str(result.get("job_dir", "?")).rstrip("/").rsplit("/", 1)[-1]


def job_number(result: dict[str, Any]) -> str:
    """The job's number in its sweep (its dir name's prefix), or its dir name."""
    return _job_name(result).split("_", 1)[0]


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)
