"""Every command of the README's code blocks, run as written from a fresh directory (`.venv` there is the repo's),
each printing what the README shows after it.

A bash block's lines are commands; `bash setup.sh` and the test command are what `.ci/run` itself runs (checked
here, not re-run). In a plain block, a line starting with `$ ` is a command (`python` there: the venv's) and the
lines after it are its output; a plain block marked `<!-- readme-test: output of the command above -->` is the
output of the bash block before it. Output lines are matched in order, with every decimal figure (a measurement)
standing for any other and `...` for anything.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, app_env, with_noise
from node_noise import NodeNoise
from test_end_to_end import assert_complete_result

BLOCK = re.compile(r"(<!-- readme-test: output of the command above -->\n)?```(\w*)\n(.*?)```", re.S)
DECIMAL = re.compile(r"-?\d+\.\d+")  # a measurement, a negative one too (the node freed memory meanwhile)
NOT_FIT_ROW = re.compile(r"│ does not fit \(")  # the stage table's verdict column: the configured loader misfits
CI_STEPS = ("bash setup.sh", ".venv/bin/python -m pytest")  # run by .ci/run itself: CI is this test for them


@dataclass
class Command:
    line: str
    expected: list[str]


def readme_commands() -> list[Command]:
    commands: list[Command] = []
    for marked, lang, body in BLOCK.findall((REPO / "README.md").read_text()):
        lines = [ln for ln in body.splitlines() if ln.strip()]
        if lang == "bash":
            commands += [Command(ln.strip(), []) for ln in lines]
        elif marked:
            commands[-1].expected += lines
        else:
            for ln in lines:
                if ln.startswith("$ "):
                    commands.append(Command(ln[2:].strip(), []))
                elif commands and any(ln.startswith("$ ") for ln in lines):
                    commands[-1].expected.append(ln)
    return commands


def normalized(line: str) -> str:
    return " ".join(DECIMAL.sub("#", line).split())


def assert_prints(output: str, expected: list[str]) -> None:
    """Each expected line matches an output line, in order."""
    lines = iter(normalized(ln) for ln in output.splitlines())
    for want in expected:
        pattern = re.compile(".*".join(re.escape(part.strip()) for part in normalized(want).split("...")))
        assert any(pattern.search(got) for got in lines), f"README line not printed (in order): {want!r}\n{output[-4000:]}"


def test_the_readme_names_its_commands_and_ci_runs_its_setup_and_test_command() -> None:
    commands = [c.line for c in readme_commands()]
    assert "bash setup.sh && .venv/bin/python -m rlhf_exp gpus=2" in commands  # the two commands a newcomer runs
    assert "bash setup.sh && .venv/bin/python -m pytest" in commands
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert all(step in ci for step in CI_STEPS), ci


RUNNABLE = [c for c in readme_commands() if c.line.removeprefix("bash setup.sh && ") not in CI_STEPS]


@pytest.mark.slow
@pytest.mark.parametrize("command", RUNNABLE, ids=[c.line.split(" -m ", 1)[-1][:60] for c in RUNNABLE])
def test_a_readme_command_runs_as_written(command: Command, tmp_path: Path, ckpt_cache: Path) -> None:
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    line = command.line.removeprefix("bash setup.sh && ")
    argv = line.split()
    assert argv[0] in (".venv/bin/python", "python"), f"no runner for README command {line!r}: add one here"
    argv[0] = argv[0] if argv[0].startswith(".venv") else sys.executable  # `python`: the venv's, as activated
    with NodeNoise() as noise:
        proc = subprocess.run(argv, cwd=tmp_path, env=app_env(ckpt_cache), capture_output=True, text=True, timeout=900)
    output = proc.stdout + proc.stderr
    plan_refuses = argv[2:4] == ["rlhf_exp", "plan"] and NOT_FIT_ROW.search(output) is not None  # its own loader
    assert proc.returncode == (1 if plan_refuses else 0), output[-4000:]  # README: Exit codes
    assert "Traceback" not in output
    assert_prints(output, command.expected)
    for result in (tmp_path / "outputs").glob("runs/*/result.json"):  # a job: every stage measured, the plan held
        gpus = next(int(arg.split("=")[1]) for arg in argv if arg.startswith("gpus="))
        assert_complete_result(with_noise(json.loads(result.read_text()), noise), gpus, zero_stage=2)  # ZeRO-2: default
