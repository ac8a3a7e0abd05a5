"""Every bench scenario's dry run (its smallest configuration, on CPU), through the one entry point: the jobs run
through the real app, each scenario writes its folder (provenance and table), and the tables hold the figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, app_env

sys.path.insert(0, str(REPO))
from bench import provenance  # noqa: E402
from bench.scenarios import SCENARIOS  # noqa: E402


@pytest.mark.slow
def test_every_scenario_dry_runs_through_python_m_bench(ckpt_cache: Path, tmp_path: Path) -> None:
    root = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench", "run", "all", "--dry-run", "--results", str(root)]
    proc = subprocess.run(cmd, cwd=REPO, env=app_env(ckpt_cache), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folders = {p.name.rsplit("-20", 1)[0]: p for p in root.iterdir()}
    assert set(folders) == set(SCENARIOS)
    for name, folder in folders.items():
        record = json.loads((folder / provenance.PROVENANCE).read_text())
        assert record["scenario"] == name and record["dry_run"] and record["command"].startswith("python -m bench run all")
        table = (folder / provenance.TABLE).read_text()
        assert table.count("\n| ") >= 2, (name, table)  # a header and at least one row
        for result_file in folder.glob("*/*.json"):  # every job completed; the watchdog's are stopped by it
            result = json.loads(result_file.read_text())
            if name == "watchdog":
                assert result["status"] == "failed" and result["failure"]["process"] == "watchdog", result_file
            else:
                assert result["status"] == "completed", result_file
    assert "1 of 1 runs stopped by the watchdog" in (folders["watchdog"] / provenance.TABLE).read_text()
    assert "| zero3_init:library | zero3_init | yes |" in (folders["zero3-profile"] / provenance.TABLE).read_text()
    assert "| NO |" not in (folders["digests"] / provenance.TABLE).read_text()
    assert "| yes |" in (folders["digests"] / provenance.TABLE).read_text()
    assert "actor.load" in (folders["seed"] / provenance.TABLE).read_text()
    assert (folders["seed"] / "naive-naive-profile.txt").read_text().count("function calls") >= 1
    assert "page_cache_to_host_gib_s" in (folders["time-to-engine"] / provenance.TABLE).read_text()
