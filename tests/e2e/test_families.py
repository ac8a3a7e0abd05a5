"""Checkpoints of every common family, as a user saves them with transformers' own classes: checked, planned,
built into the four engines by every kind of loader and trained one PPO step on CPU ranks, weights bit-identical
across loaders; encoder-only and encoder-decoder checkpoints refused in one line before any rank."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import app_env, run_sweep_in

from rlhf_exp.config.presets import PRESETS, preset_config

FAMILIES = ("mistral", "qwen2", "gemma", "phi", "gpt_neox", "opt")  # llama: every other test
# staggered is naive taking turns, and direct on CPU ranks from_pretrained as low_mem: both compared with the others
# on Llama (tests/e2e/test_loaders.py); fast_read on every family: tests/unit/test_loading.py
ALL_LOADERS = "loader=naive,low_mem,rank0_broadcast,zero3_init"


def save_pretrained(family: str, out: Path) -> Path:
    """A tiny random checkpoint of `family`, written by transformers itself (as a user's would be)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(preset_config(f"tiny-{family}"), dtype=torch.float16)
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def user_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("families")
    return {family: save_pretrained(family, base / family) for family in FAMILIES}


def weights(result: dict) -> dict[str, str]:
    return {f.name: f.read_text() for f in sorted((Path(result["job_dir"]) / "weights").glob("*.json"))}


# each job loads two families at once: one as actor and ref, another as critic and reward (a causal-LM checkpoint as
# its own critic: its lm_head unused, a fresh value head); the tiny presets share one vocabulary
PAIRS = (("mistral", "gemma"), ("phi", "gpt_neox"))


@pytest.mark.slow
def test_a_users_checkpoint_of_each_family_builds_the_engine_the_same_with_every_kind_of_loader(
    user_checkpoints: dict[str, Path], tmp_path: Path, ckpt_cache: Path
) -> None:
    """A sweep over both loaders per family pair (qwen2 and opt: every loader, below)."""
    common = ("model=local", "gpus=2", "zero=stage3", "verify_weights=true", "wandb.mode=disabled")
    results = []
    for actor, critic in PAIRS:  # Hydra sweeps the product of keys, not pairs: a sweep per pair
        pair = (f"model.actor.path={user_checkpoints[actor]}", f"model.critic.path={user_checkpoints[critic]}")
        # DeepSpeed-Chat 2023's full private read vs the partitioned from_pretrained
        proc, pair_results = run_sweep_in(tmp_path / actor, ckpt_cache, *pair, *common, "loader=naive,zero3_init")
        assert proc.returncode == 0, proc.stderr[-3000:]
        results += pair_results
    assert len(results) == 2 * len(PAIRS)
    for naive, zero3 in zip(results[::2], results[1::2], strict=True):
        family = Path(naive["checkpoints"]["actor"]).name, Path(naive["checkpoints"]["critic"]).name
        for r in (naive, zero3):
            assert r["status"] == "completed", (family, r["loader"], r["failure"])
            assert r["plan"]["stages"], family
        assert (naive["loader"], zero3["loader"]) == ("naive", "zero3_init"), family
        assert weights(naive) == weights(zero3) and len(weights(naive)) == 8, family  # four engines, after init and PPO
        for role in ("actor", "critic"):  # each family's own linear layers got adapters
            engine = json.loads((Path(naive["job_dir"]) / "weights" / f"{role}.json").read_text())
            assert any("lora_A" in name for name in engine), (family, role)


@pytest.mark.slow
def test_the_loaders_build_the_same_engines_and_ppo_step_from_a_tied_qwen2_and_deepspeed_chats_opt(
    user_checkpoints: dict[str, Path], tmp_path: Path, ckpt_cache: Path
) -> None:
    """Qwen2 as a user saved it (lm_head tied to the embedding, stored once) as actor and ref; OPT as our generator
    writes it (value head file included: tied lm_head, a 64 -> 32 projection at the end, dropout 0.1 in training,
    which the PPO step's masks must not depend on the loader for) as critic and reward."""
    qwen2 = user_checkpoints["qwen2"]
    overrides = ("model.actor.path=" + str(qwen2), "model.critic.preset=tiny-opt", "model.num_padding_at_beginning=1")
    assert_the_loaders_give_the_same_engines(tmp_path, ckpt_cache, *overrides, ALL_LOADERS)


def assert_the_loaders_give_the_same_engines(tmp_path: Path, ckpt_cache: Path, *overrides: str) -> None:
    common = ("gpus=2", "zero=stage3", "verify_weights=true", "wandb.mode=disabled", "dist_timeout_s=120")
    proc, results = run_sweep_in(tmp_path / "sweep", ckpt_cache, *overrides, *common)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["status"] for r in results] == ["completed"] * 4, [(r["loader"], r["failure"]) for r in results]
    reference = weights(results[0])
    assert reference and all(weights(r) == reference for r in results[1:]), [
        r["loader"] for r in results if weights(r) != reference
    ]


@pytest.fixture
def plan(
    ckpt_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """The `plan` command, in this process: (exit code, stdout, stderr)."""
    from rlhf_exp.cli.plan_command import main

    monkeypatch.setenv("RLHF_EXP_CACHE", str(ckpt_cache))

    def _plan(*overrides: str) -> tuple[int, str, str]:
        code = main(list(overrides))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _plan


def test_presets_of_deepspeed_chat_and_a_current_family_plan_without_weights(plan: Callable[..., tuple[int, str, str]]) -> None:
    assert PRESETS["opt-350m"].shape["word_embed_proj_dim"] == 512
    for model in ("opt-1.3b", "qwen2.5-7b"):
        code, out, err = plan(f"model={model}", "gpus=8")
        assert code in (0, 1), err[-2000:]
        assert "reward.init" in out and "naive" in out


def test_plan_reads_config_json_alone(tmp_path: Path, plan: Callable[..., tuple[int, str, str]]) -> None:
    ckpt = tmp_path / "config-only"
    preset_config("tiny-qwen2").save_pretrained(ckpt)
    code, out, err = plan("model=local", f"model.actor.path={ckpt}", f"model.critic.path={ckpt}", "gpus=2")
    assert code == 0, err[-2000:]
    assert "plan: loader=naive, 2 rank(s) on cpu" in out


def hub_cache(root: Path, hub_id: str, source: Path) -> None:
    """The local Hugging Face cache layout, as huggingface-cli download leaves it."""
    repo = root / f"models--{hub_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    for f in source.iterdir():
        (snapshot / f.name).write_bytes(f.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)


def test_a_hub_id_is_found_in_the_local_cache_offline(
    tmp_path: Path, ckpt_cache: Path, user_checkpoints: dict[str, Path]
) -> None:
    cache = tmp_path / "hf"
    hub_cache(cache, "acme/tiny-mistral", user_checkpoints["mistral"])
    env = {**app_env(ckpt_cache), "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "rlhf_exp",
        "plan",
        "model=local",
        "model.actor.path=acme/tiny-mistral",
        "model.critic.path=acme/tiny-mistral",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    missing = subprocess.run(
        [*cmd[:-2], "model.actor.path=acme/absent", "model.critic.path=acme/tiny-mistral"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        f"error: model.actor: acme/absent is not a checkpoint directory, nor a model in the local Hugging Face cache ({cache}); "
        "valid: a directory with config.json, or a hub id downloaded beforehand (huggingface-cli download acme/absent)"
    )


@pytest.mark.parametrize(
    ("model_type", "kind"),
    [
        ("bert", "an encoder-only model (bert)"),
        ("t5", "an encoder-decoder model (t5)"),
        ("not_a_model", "model_type 'not_a_model'"),
    ],
)
def test_unsupported_checkpoints_get_one_line_before_any_rank(
    model_type: str, kind: str, tmp_path: Path, ckpt_cache: Path, plan: Callable[..., tuple[int, str, str]]
) -> None:
    ckpt = tmp_path / model_type
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": model_type}))
    paths = ("model=local", f"model.actor.path={ckpt}", f"model.critic.path={ckpt}")
    job = [sys.executable, "-m", "rlhf_exp", *paths, f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.run(job, env=app_env(ckpt_cache), capture_output=True, text=True, timeout=300)
    code, _, err = plan(*paths)  # the same verdict from `plan`
    for returncode, stderr in ((proc.returncode, proc.stderr), (code, err)):
        assert returncode == 2, stderr[-2000:]
        (line,) = stderr.strip().splitlines()
        assert line.startswith(f"error: model.actor.path: {ckpt}") and kind in line and "valid: a decoder-only causal LM" in line
    assert not (tmp_path / "run" / "events").exists()
