"""The job directory protocol (rlhf_exp/jobdir.py): the spec round-trips, a rerun clears only its own records."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_settings

from rlhf_exp.jobdir import JobDir, JobSpec
from rlhf_exp.records import Sample


def spec(run_id: str) -> JobSpec:
    settings = compose_settings("gpus=2", "loader=direct")
    return JobSpec(
        settings, {"loader": "direct"}, "cpu", "gloo", {"actor": Path("/a"), "critic": Path("/c")}, {"gpus": 2}, run_id
    )


def test_the_spec_round_trips_typed(tmp_path: Path) -> None:
    job_dir = JobDir(tmp_path)
    job_dir.write_spec(spec("r1"))
    back = job_dir.read_spec()
    assert back.settings.loader.name == "direct" and back.settings.gpus == 2
    assert back.checkpoints == {"actor": Path("/a"), "critic": Path("/c")} and back.run_id == "r1"


def test_other_nodes_wait_for_this_runs_spec_not_a_stale_one(tmp_path: Path) -> None:
    job_dir = JobDir(tmp_path)
    job_dir.write_spec(spec("old"))
    with pytest.raises(TimeoutError, match="for run new"):
        job_dir.wait_for_spec("new", timeout_s=0.3)
    job_dir.write_spec(spec("new"))
    assert job_dir.wait_for_spec("new", timeout_s=1).run_id == "new"


def test_clear_removes_a_runs_records_and_nothing_else(tmp_path: Path) -> None:
    job_dir = JobDir(tmp_path)
    job_dir.write_spec(spec("r"))
    job_dir.write_result({"status": "completed"})
    job_dir.rank_events_file(0).parent.mkdir()
    job_dir.rank_events_file(0).write_text("{}\n")
    job_dir.samples_file(0).write_text("{}\n")
    job_dir.samples_file(1).write_text("{}\n")
    job_dir.write_stop_reason("watchdog", 1.0)
    (tmp_path / "wandb").mkdir()  # not a run record of ours: kept
    job_dir.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wandb"]
    assert job_dir.read_result() is None and job_dir.read_stop_reason() is None


def test_torn_lines_are_skipped(tmp_path: Path) -> None:
    job_dir = JobDir(tmp_path)
    job_dir.samples_file().write_text('{"header": true}\n{"t": 1, "node_used": 5}\n{"t": 2, "node_us')
    assert job_dir.read_samples() == [Sample(t=1, node_used=5)]
