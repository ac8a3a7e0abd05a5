"""loader=auto and the fit check on plans sized from presets (no checkpoint, no process)."""

from __future__ import annotations

import pytest
from conftest import compose_settings

from rlhf_exp.config.schema import ConfigError
from rlhf_exp.config.units import GIB
from rlhf_exp.plan.fit import Capacity, all_plans, choose, first_misfit, usable_loaders
from rlhf_exp.plan.inputs import role_shapes

BASE_RSS = 0.5 * GIB  # a rank's footprint before any model, as plan.inputs.base_rank_bytes measures it


def test_auto_picks_the_fastest_loader_that_fits_and_the_fit_check_names_it() -> None:
    settings = compose_settings("model=llama-7b", "gpus=8", "loader=auto")
    plans = all_plans(settings, role_shapes(settings, {}), "cuda", BASE_RSS)  # sizes from the preset, no checkpoint
    node = {name: max(st.node_peak_gib for st in plan.stages) for name, plan in plans.items()}
    assert node["naive"] > 8 * 4 * 6.7 > node["staggered"] > node["direct"]  # 8 fp32 copies of a 6.7B actor
    roomy = Capacity(host_bytes=2000 * GIB, gpu_bytes=140 * GIB)
    assert choose(settings, plans, roomy) == usable_loaders(settings)[0]  # the fastest measured (measured_speed.json)
    tight = Capacity(host_bytes=(node["staggered"] + node["direct"]) / 2 * GIB, gpu_bytes=140 * GIB)
    fitting = [name for name, plan in plans.items() if first_misfit(plan, tight) is None]
    assert "naive" not in fitting and "staggered" not in fitting and "direct" in fitting
    naive = settings.model_copy(update={"loader": settings.loader.model_copy(update={"name": "naive"})})
    with pytest.raises(ConfigError, match=r"^plan: loader=naive needs .* at actor\.load, .* loaders that fit: direct"):
        choose(naive, plans, tight)
    small_gpu = Capacity(host_bytes=2000 * GIB, gpu_bytes=8 * GIB)  # 13 GiB of bf16 weights per rank do not fit
    with pytest.raises(ConfigError, match="GiB of GPU memory at actor.load"):
        choose(settings, plans, small_gpu)
