"""Every check the config alone decides, in-process: DeepSpeed configs as DeepSpeed reads them, fault targets,
a seeded fuzz of the schema (a bad leaf value gives one line naming a key, never a traceback)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from conftest import compose_settings, deepspeed_chat_stage2

from rlhf_exp.config.compose import compose_config
from rlhf_exp.config.deepspeed import check_role_configs, engine_settings, role_ds_config
from rlhf_exp.config.errors import ConfigError
from rlhf_exp.config.schema import validate


def custom(tmp_path: Path, content: str, *extra: str) -> list[str]:
    path = tmp_path / "ds.json"
    path.write_text(content)
    return ["zero=custom", f"zero.config_file={path}", *extra]


@pytest.mark.parametrize(
    ("content", "extra", "expected"),
    [
        ('{"zero_optimisation": {"stage": 3}}', (), "'zero_optimisation' is not a DeepSpeed setting"),
        ('{"zero_optimization": {"stage": 3, "overlap_com": true}}', (), "DeepSpeed refuses it: overlap_com: Extra inputs"),
        ('{"train_batch_size": 3}', ("gpus=2",), "train_batch_size 3 != train_micro_batch_size_per_gpu 1 x"),
        ('{"fp16": {"enabled": true}}', (), "fp16 is not supported by DeepSpeed on CPU ranks"),
    ],
)
def test_a_custom_deepspeed_config_is_read_as_deepspeed_reads_it(
    tmp_path: Path, content: str, extra: tuple, expected: str
) -> None:
    settings = compose_settings(*custom(tmp_path, content, *extra))
    with pytest.raises(ConfigError) as err:
        check_role_configs(settings, "cpu")
    assert str(err.value).startswith(f"zero.actor.config_file: {tmp_path / 'ds.json'}") and expected in str(err.value)


def test_invalid_json_names_the_key_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^zero\.actor\.config_file: .*ds\.json is not valid JSON \(Expecting"):
        compose_settings(*custom(tmp_path, '{"zero_optimization": '))
    with pytest.raises(ConfigError, match=r"^zero\.actor\.config_file: .*is not valid JSON"):
        compose_settings(*custom(tmp_path, "{", "loader=zero3_init"))


def test_the_result_records_what_a_custom_config_runs(tmp_path: Path) -> None:
    settings = compose_settings(*custom(tmp_path, json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True}})))
    check_role_configs(settings, "cpu")
    ran = engine_settings(role_ds_config(settings, "ref", 1))
    assert ran == {"zero_stage": 3, "dtype": "bf16", "offload_optimizer": "none", "offload_param": "none"}
    with pytest.raises(ConfigError, match="^dtype: fp16 is not supported by DeepSpeed on CPU ranks"):
        check_role_configs(compose_settings("dtype=fp16"), "cpu")
    check_role_configs(compose_settings("dtype=fp16"), "cuda")  # fine on GPUs


def test_a_fault_must_name_a_stage_and_a_rank_of_the_job() -> None:
    with pytest.raises(
        ConfigError, match=r"^fault\.stage: 'critic\.lod' is not a stage of this job; valid: dist_init, actor\.load"
    ):
        compose_settings("fault.stage=critic.lod")
    with pytest.raises(ConfigError, match=r"^fault\.rank: 2 is not a rank of this job; valid: 0 to 1"):
        compose_settings("gpus=2", "fault.stage=actor.load", "fault.rank=2")
    with pytest.raises(ConfigError, match="ppo1.generate"):
        compose_settings("ppo.steps=0", "fault.stage=ppo1.generate")


WRONG = [-1, 0, 1.5, "abc", True, None, [1], {"a": 1}, float("inf"), ""]


def leaves(node: object, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [key for k, v in node.items() for key in leaves(v, f"{prefix}{k}.")]
    return [prefix.rstrip(".")]


def test_fuzzed_leaf_values_give_one_line_or_a_valid_config() -> None:
    """300 type-wrong or out-of-range values, each on one leaf of the composed config (seeded)."""
    from omegaconf import OmegaConf

    base = compose_config([])
    skip = ("hydra", "model.cache_dir")
    keys = [k for k in leaves(OmegaConf.to_container(base, resolve=False)) if not k.startswith(skip)]
    rng = random.Random(1234)
    refused = 0
    for _ in range(300):
        key, value = rng.choice(keys), rng.choice(WRONG)
        cfg = base.copy()
        OmegaConf.update(cfg, key, value, merge=False, force_add=True)
        try:
            validate(cfg)
        except ConfigError as err:
            message = str(err)
            assert "\n" not in message and message.split(":")[0], (key, value, message)
            refused += 1
    assert refused > 200, refused


def test_one_deepspeed_chat_json_serves_the_roles_it_can(tmp_path: Path) -> None:
    """ZeRO-2 needs an optimizer: the train roles run the JSON, the frozen ones DeepSpeed-Chat's eval config at 0."""
    path = deepspeed_chat_stage2(tmp_path)
    settings = compose_settings("zero=custom", f"zero.config_file={path}")
    check_role_configs(settings, "cpu")
    stages = {
        role: engine_settings(role_ds_config(settings, role, 1))["zero_stage"] for role in ("actor", "critic", "ref", "reward")
    }
    assert stages == {"actor": 2, "critic": 2, "ref": 0, "reward": 0}
    assert settings.zero.actor.config_file == str(path) and settings.zero.ref.config_file is None


def test_a_frozen_roles_own_zero2_json_is_refused_naming_its_key(tmp_path: Path) -> None:
    path = deepspeed_chat_stage2(tmp_path)
    with pytest.raises(ConfigError, match=r"^zero\.reward\.config_file: .* is ZeRO stage 2, which DeepSpeed runs only with"):
        compose_settings(f"zero.reward.config_file={path}")
