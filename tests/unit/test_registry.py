"""The loader declarations are the one list of loaders: the Hydra group, validation, auto and help agree with it."""

from __future__ import annotations

import pytest
from conftest import compose_settings

from rlhf_exp.cli.help import help_text
from rlhf_exp.config.compose import group_choices
from rlhf_exp.config.errors import ConfigError
from rlhf_exp.loaders.registry import AUTO, LOADER_CHOICES, LOADERS, auto_order, measured_seconds_per_gib
from rlhf_exp.plan.fit import usable_loaders


def test_every_declared_loader_has_its_yaml_and_nothing_else_does() -> None:
    assert sorted(group_choices("loader")) == sorted(LOADER_CHOICES)
    for name in LOADERS:
        assert compose_settings(f"loader={name}", *(["zero=stage3"] if LOADERS[name].partitioned else [])).loader.name == name


def test_every_declaration_resolves_to_a_loader_function() -> None:
    for spec in LOADERS.values():
        assert callable(spec.load_function()), spec.name


def test_auto_order_is_the_shipped_measurement_fastest_first() -> None:
    speed = measured_seconds_per_gib()
    order = [spec.name for spec in auto_order()]
    assert sorted(order) == sorted(LOADERS) and speed, "measured_speed.json ships with the package"
    timed = [name for name in order if name in speed]
    assert [speed[n] for n in timed] == sorted(speed[n] for n in timed)
    assert order[: len(timed)] == timed  # untimed loaders come after every timed one


def test_partitioned_loaders_need_zero3_in_validation_and_the_planner() -> None:
    partitioned = [name for name, spec in LOADERS.items() if spec.partitioned]
    assert partitioned == ["zero3_init"]
    with pytest.raises(ConfigError, match="zero3_init needs ZeRO-3 for every role"):
        compose_settings("loader=zero3_init", "zero=stage2")
    assert "zero3_init" not in usable_loaders(compose_settings("zero=stage2"))
    assert "zero3_init" in usable_loaders(compose_settings("zero=stage3"))


def test_help_names_the_app_its_subcommands_and_every_choice_but_private_files() -> None:
    text = help_text()
    assert text.startswith("rlhf_exp:") and "powered by Hydra" not in text
    for word in ("python -m rlhf_exp plan", "python -m rlhf_exp report", "-m gpus=1,8"):
        assert word in text
    for group in ("model", "zero", "lora", "loader"):
        for option in group_choices(group):
            assert f"    {option} " in text, (group, option)
    for spec in LOADERS.values():
        assert spec.summary in text
    assert "_base" not in text and AUTO in text
    assert "job_timeout_s: 3600      # the whole job (all ranks) is stopped after this" in text  # keys keep their comments
