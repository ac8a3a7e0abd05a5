"""Every row of the README's bad-input table, run on the real command line: exit 2, the very line the table
shows on stderr, no rank started. Placeholders such as <truncated-ckpt> are made here from the tiny preset."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from conftest import REPO, app_env
from safetensors.torch import load_file

from rlhf_exp.checkpoints.generate import resolve_checkpoint
from rlhf_exp.cli.plan_command import main as plan_main

TABLE = re.compile(r"<!-- bad-inputs:start -->(.*?)<!-- bad-inputs:end -->", re.S)


def readme_rows() -> list[tuple[str, str]]:
    """(overrides, expected stderr line) per table row, backticks stripped."""
    block = TABLE.search((REPO / "README.md").read_text())
    assert block, "README.md lacks the bad-inputs table"
    rows = []
    for line in block.group(1).strip().splitlines()[2:]:
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        rows.append((cells[0], cells[1]))
    return rows


class CodeInPickle:
    """What a malicious pytorch_model.bin carries: unpickling it would run a shell command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.marker}",))


def make_placeholders(root: Path, cache: Path) -> dict[str, Path]:
    """Broken checkpoints, each a copy of the tiny actor with one thing wrong."""
    ckpts = cache / "checkpoints"
    actor = resolve_checkpoint("tiny", None, "causal_lm", "fp16", str(ckpts))
    critic = resolve_checkpoint("tiny", None, "value", "fp16", str(ckpts))
    made = {"critic": critic, "a-file": root / "a-file", "pickle-marker": root / "pickle-ran"}
    made["a-file"].write_text("not a directory")

    def copy(name: str) -> Path:
        out = root / name
        shutil.copytree(actor, out)
        made[name] = out
        return out

    weights = copy("truncated-ckpt") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    (copy("config-only-ckpt") / "model.safetensors").unlink()
    config = copy("mismatched-ckpt") / "config.json"
    config.write_text(config.read_text().replace('"intermediate_size": 172', '"intermediate_size": 344'))
    for name, content in {
        "unknown-key-json": '{"zero_optimisation": {"stage": 3}}',
        "zero-key-json": '{"zero_optimization": {"stage": 2, "overlap_com": true}}',
        "batch-json": '{"train_batch_size": 3}',
        "bad-json": '{"zero_optimization": ',
        "zero2-json": '{"zero_optimization": {"stage": 2}}',
    }.items():
        made[name] = root / f"{name}.json"
        made[name].write_text(content)
    for name, model_type in (("encoder-only-ckpt", "bert"), ("encoder-decoder-ckpt", "t5")):
        (copy(name) / "config.json").write_text(f'{{"model_type": "{model_type}"}}')
    evil = copy("pickle-code-ckpt")
    state = load_file(str(evil / "model.safetensors"))
    (evil / "model.safetensors").unlink()
    torch.save({**state, "extra": CodeInPickle(made["pickle-marker"])}, evil / "pytorch_model.bin", pickle_module=pickle)
    return made


def run_cli(overrides: str, cwd: Path, cache: Path, case: int = 0) -> subprocess.CompletedProcess:
    # a dir of its own per case: cases run two at a time, and a refused run removes its dir (it leaves nothing)
    cmd = [sys.executable, "-m", "rlhf_exp", f"hydra.run.dir={cwd}/run{case}", *overrides.split()]
    if "-m" in cmd[3:]:
        cmd[3] = f"hydra.sweep.dir={cwd}/sweep{case}"
    if "hydra.run.dir=" in overrides:
        cmd.pop(3)
    return subprocess.run(cmd, cwd=cwd, env=app_env(cache), capture_output=True, text=True, timeout=300)


def test_every_bad_input_in_the_readme_gets_its_one_line_error(
    tmp_path: Path, ckpt_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = make_placeholders(tmp_path, ckpt_cache)
    gpu_host = torch.cuda.is_available()
    cases = []
    for overrides, expected in readme_rows():
        if "(GPU host)" in overrides:
            if not gpu_host:
                continue  # needs a GPU host; run by hand on the H200 (bench/README.md)
            overrides = overrides.replace("(GPU host)", "")
        for name, path in made.items():
            overrides = overrides.replace(f"<{name}>", str(path))
        cases.append((overrides, expected))
    assert len(cases) >= 20
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = list(pool.map(lambda i: run_cli(cases[i][0], tmp_path, ckpt_cache, i), range(len(cases))))
    for (overrides, expected), proc in zip(cases, procs, strict=True):
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        got = lines[-1] if lines else ""
        for name, path in made.items():
            got = got.replace(str(path), f"<{name}>")
        assert (proc.returncode, got) == (2, expected), (overrides, proc.stderr[-1500:])
        assert sum(ln.startswith("error: ") for ln in lines) == 1
        assert "rlhf_exp.rank.main" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert not made["pickle-marker"].exists()  # the pickled command never ran
    # `plan` gives the same verdict on everything the config alone decides (its command, in this process)
    monkeypatch.setenv("RLHF_EXP_CACHE", str(ckpt_cache))
    for overrides, expected in cases:
        if PLAN_SKIPS.search(overrides):
            continue
        code = plan_main(overrides.split())
        err = capsys.readouterr().err.strip()
        got = err.splitlines()[-1] if err else ""
        for name, path in made.items():
            got = got.replace(str(path), f"<{name}>")
        assert (code, got) == (2, expected), ("plan", overrides, err[-1500:])


# rows `plan` does not share: sweeps and output dirs (plan writes none), weights (plan reads config.json alone),
# the checkpoint cache (plan generates nothing)
PLAN_SKIPS = re.compile(r"-m |hydra\.|truncated-ckpt|config-only-ckpt|mismatched-ckpt|pickle-code-ckpt|cache_dir")


@pytest.mark.slow
def test_a_pickle_checkpoint_of_plain_tensors_loads_with_weights_only(run_app, tmp_path: Path, ckpt_cache: Path) -> None:
    made = make_placeholders(tmp_path, ckpt_cache)
    plain = tmp_path / "pickle-ckpt"
    shutil.copytree(made["config-only-ckpt"], plain)
    actor = resolve_checkpoint("tiny", None, "causal_lm", "fp16", str(ckpt_cache / "checkpoints"))
    torch.save(load_file(str(actor / "model.safetensors")), plain / "pytorch_model.bin")
    proc, result = run_app(
        "model=local", f"model.actor.path={plain}", f"model.critic.path={made['critic']}", "roles=[actor]", "ppo.steps=0"
    )
    assert proc.returncode == 0 and result["status"] == "completed", proc.stderr[-2000:]
