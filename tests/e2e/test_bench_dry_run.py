"""Every bench scenario's dry run (its smallest configuration, on CPU), through the one entry point: the jobs run
through the real app, the scenario writes its folder (provenance and table), and the table holds the figures.
Scenarios run a few to one `python -m bench run A B ... --dry-run` (its imports and checkpoint checks paid once), in
groups of about equal time, one test class each, so that the suite's two workers share them (xdist's loadscope: a
class is a unit)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, app_env

sys.path.insert(0, str(REPO))
from bench import provenance  # noqa: E402
from bench.scenarios import SCENARIOS  # noqa: E402

# what each scenario's table must say beyond a header and a row
TABLE_HOLDS = {
    "watchdog": "1 of 1 runs stopped by the watchdog",
    "zero3-profile": "| zero3_init:library | zero3_init | yes |",
    "digests": "| yes |",
    "seed": "actor.load",
    "time-to-engine": "page_cache_to_host_gib_s",
    "fit-check": "| seed-naive | naive |",
    "gpu-peaks": "| ppo-long/direct | completed |",
    "first-run": "naive-first / naive-second: completed / completed",
}


# seconds of each scenario's dry run on the 2-core box (pytest --durations, 2026-12-06); a new one counts as 25
DRY_SECONDS = {"fit-check": 72, "zero3-profile": 53, "digests": 46, "seed": 28, "read-pieces": 26, "seed-a100": 26}
GROUPS = 3


def groups() -> list[list[str]]:
    """The scenarios in GROUPS groups of about equal time, longest first into the lightest group."""
    out: list[list[str]] = [[] for _ in range(GROUPS)]
    for name in sorted(SCENARIOS, key=lambda n: -DRY_SECONDS.get(n, 25)):
        min(out, key=lambda g: sum(DRY_SECONDS.get(n, 25) for n in g)).append(name)
    return out


def dry_run(names: list[str], ckpt_cache: Path, tmp_path: Path) -> None:
    root = tmp_path / "results"
    temp = Path(tempfile.mkdtemp(prefix="bd"))  # short: AF_UNIX socket paths (wandb's) live under TMPDIR
    cmd = [sys.executable, "-m", "bench", "run", *names, "--dry-run", "--results", str(root)]
    env = {**app_env(ckpt_cache), "TMPDIR": str(temp)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    left = [p.name for p in temp.glob("bench_*")]
    shutil.rmtree(temp, ignore_errors=True)
    _, mark, after = proc.stdout.partition("job folders kept")  # the bench prints each kept job's log end
    kept = (mark + after)[:4000]
    assert not left, f"job folders left behind: {left}\n{kept}\n{proc.stderr[-3000:]}"  # every job wrote result.json
    folders = {folder.name.rsplit("-20", 1)[0]: folder for folder in root.iterdir()}
    assert sorted(folders) == sorted(names)
    for name, folder in folders.items():
        check_folder(name, folder, " ".join(names))


def check_folder(name: str, folder: Path, names: str) -> None:
    record = json.loads((folder / provenance.PROVENANCE).read_text())
    assert record["scenario"] == name and record["dry_run"] and record["command"].startswith(f"python -m bench run {names}")
    table = (folder / provenance.TABLE).read_text()
    assert table.count("\n| ") >= 2, table  # a header and at least one row
    assert TABLE_HOLDS.get(name, "") in table
    for result_file in folder.glob("*/*.json"):  # every job completed; the watchdog's are stopped by it
        result = json.loads(result_file.read_text())
        if name == "watchdog":
            assert result["status"] == "failed" and result["failure"]["process"] == "watchdog", result_file
        elif name == "fit-check" and result_file.parent.name.endswith(("-at-plan", "-below-need")):
            assert result["emulation"]["host"]["cap_gib"] > 0, result_file  # capped: completing is not the point
        else:
            assert result["status"] == "completed", result_file
    if name == "digests":
        assert "| NO |" not in table
    if name == "seed":
        assert (folder / "naive-naive-profile.txt").read_text().count("function calls") >= 1


def group_class(names: list[str]) -> type:
    @pytest.mark.slow
    class DryRun:
        def test_dry_runs_through_python_m_bench(self, ckpt_cache: Path, tmp_path: Path) -> None:
            dry_run(names, ckpt_cache, tmp_path)

    DryRun.__name__ = DryRun.__qualname__ = "TestDryRun_" + "_".join(n.replace("-", "_") for n in names)
    return DryRun


for _class in map(group_class, groups()):
    globals()[_class.__name__] = _class
