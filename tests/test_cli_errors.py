"""Bad input on the real command line: non-zero exit, one line naming the key, and no rank started."""

from __future__ import annotations

import pytest
from conftest import RunApp


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["loader=foo"], "loader=foo: unknown loader; valid: direct, low_mem, naive, rank0_broadcast, staggered, zero3_init"),
        (["-m", "loader=naive,foo"], "loader=foo: unknown loader; valid: direct"),
        (["loader=zero3_init", "zero=stage2"], "zero3_init needs ZeRO-3 for every role"),
        (["gpus=0"], "gpus: Input should be greater than 0"),
        (["zero.actor.stage=5"], "zero.actor.stage: Input should be 0, 1, 2 or 3"),
        (["zero=stage5"], "zero=stage5: unknown zero; valid: custom, stage0, stage1, stage2"),
        (["model=local", "model.actor.path=/no/such/ckpt", "model.critic.path=/no/such/ckpt"], "model.actor: "),
        (["device=cuda"], "device: cuda requested but no GPU is visible; valid here: auto, cpu"),
    ],
)
def test_bad_input_fails_before_any_rank(run_app: RunApp, overrides: list[str], needle: str) -> None:
    proc, result = run_app(*overrides, timeout=120)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error: "), proc.stderr
    assert needle in lines[-1]
    assert sum(ln.startswith("error: ") for ln in lines) == 1
    assert result is None
    assert "rank_main" not in proc.stdout + proc.stderr
