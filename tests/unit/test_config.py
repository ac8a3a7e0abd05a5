"""Every config group option composes and validates; DeepSpeed configs keep DeepSpeed-Chat's keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_settings

from rlhf_exp.checkpoints.generate import resolve_checkpoint
from rlhf_exp.cli.argv_checks import check_group_choices
from rlhf_exp.config.compose import group_choices
from rlhf_exp.config.deepspeed import role_ds_config
from rlhf_exp.config.errors import ConfigError


@pytest.fixture(scope="module")
def tiny_actor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return resolve_checkpoint("tiny", None, "causal_lm", "fp16", str(tmp_path_factory.mktemp("c")))


@pytest.fixture(scope="module")
def ds_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ds") / "ds_config.json"
    path.write_text(json.dumps({"train_batch_size": "auto", "zero_optimization": {"stage": 1}, "bf16": {"enabled": True}}))
    return path


def extra_overrides(group: str, option: str, tiny_actor: Path, ds_json: Path) -> list[str]:
    if group == "model" and option == "local":
        return [f"model.actor.path={tiny_actor}", f"model.critic.path={tiny_actor}"]
    if group == "zero" and option == "custom":
        return [f"zero.config_file={ds_json}"]
    if group == "loader" and option == "zero3_init":
        return ["zero=stage3"]
    return []


@pytest.mark.parametrize("group", ["model", "zero", "lora", "loader"])
def test_every_option_of_every_group_composes(group: str, tiny_actor: Path, ds_json: Path) -> None:
    options = group_choices(group)
    assert options, f"no options in conf/{group}"
    for option in options:
        settings = compose_settings(f"{group}={option}", *extra_overrides(group, option, tiny_actor, ds_json))
        for role in ("actor", "ref", "critic", "reward"):
            cfg = role_ds_config(settings, role, world_size=2)
            assert cfg["train_batch_size"] == 2 * cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]


def test_presets_pick_what_their_names_say() -> None:
    assert {compose_settings("zero=stage3").zero.ref.stage, compose_settings("zero=stage3").zero.reward.stage} == {3}
    assert compose_settings("zero=stage2").zero.ref.stage == 0  # DeepSpeed-Chat: eval stage 0 unless ZeRO-3
    assert compose_settings("zero=stage2_offload").zero.actor.offload
    assert compose_settings("lora=r128").lora.r == 128
    assert not compose_settings("lora=disabled").lora.enabled
    assert compose_settings("model=llama-13b").model.actor.preset == "llama-13b"


def test_train_and_eval_configs_keep_deepspeed_chat_keys() -> None:
    settings = compose_settings("zero=stage2_offload", "gpus=4")
    actor = role_ds_config(settings, "actor", world_size=4)
    ref = role_ds_config(settings, "ref", world_size=4)
    assert actor["zero_optimization"]["stage"] == 2
    assert actor["zero_optimization"]["offload_optimizer"] == {"device": "cpu"}
    assert actor["bf16"] == {"enabled": True} and actor["gradient_clipping"] == 1.0
    assert "offload_optimizer" not in ref["zero_optimization"] and ref["zero_optimization"]["stage"] == 0
    assert actor["train_batch_size"] == 4


def test_user_ds_config_fills_auto_batch_keys(ds_json: Path) -> None:
    settings = compose_settings("zero=custom", f"zero.config_file={ds_json}")
    cfg = role_ds_config(settings, "critic", world_size=3)
    assert cfg["zero_optimization"]["stage"] == 1 and cfg["train_batch_size"] == 3


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["gpus=0"], "gpus: Input should be greater than 0"),
        (["zero.actor.stage=5"], "zero.actor.stage: Input should be 0, 1, 2 or 3"),
        (["device=tpu"], "device: Input should be 'auto', 'cuda' or 'cpu'"),
        (["model=local"], "model.actor.path: missing value"),
        (["model=local", "model.actor.path=/nonexistent", "model.critic.path=/nonexistent"], "model.actor: Value error"),
        (["model.actor.preset=llama-70b"], "model.actor.preset: unknown preset 'llama-70b'; valid: tiny, medium"),
        (["zero=custom"], "zero.config_file: missing value"),
        (["loader.name=bogus"], "loader: Value error, unknown loader 'bogus'; valid: naive, staggered"),
        (["lora.r=0"], "lora.r: Input should be greater than 0"),
        (["roles=[policy]"], "roles.0: Input should be 'actor', 'ref', 'critic' or 'reward'"),
        (["loader=zero3_init", "zero=stage2"], "loader: zero3_init needs ZeRO-3 for every role, but zero.actor has stage 2"),
        (["roles=[actor]"], "ppo.steps: a PPO step needs all four roles, but roles is ['actor']"),
    ],
)
def test_bad_values_give_one_line_naming_the_key(overrides: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        compose_settings(*overrides)
    message = str(err.value)
    assert "\n" not in message
    key = expected.split(":")[0]
    assert message.startswith(key), message
    assert expected.split(": ", 1)[1].removeprefix("Value error, ") in message or expected.endswith("Value error")


def test_unknown_group_choice_is_one_line_with_valid_choices() -> None:
    valid = "auto, direct, low_mem, naive, rank0_broadcast, staggered, zero3_init"
    assert check_group_choices(["loader=naive,foo"]) == f"loader=foo: unknown loader; valid: {valid}"
    assert check_group_choices(["zero=stage5"]).startswith("zero=stage5: unknown zero; valid: custom, stage0")
    assert check_group_choices(["gpus=1,2", "loader=naive"]) is None
