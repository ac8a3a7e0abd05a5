"""`python -m rlhf_exp --help`: the app, its subcommands and its config groups (with each option's comment)."""

from __future__ import annotations

from rlhf_exp.config.compose import CONF_DIR, CONFIG_NAME, GROUPS, group_choices
from rlhf_exp.loaders.registry import AUTO, LOADERS

USAGE = """rlhf_exp: reproduce, measure, predict and fix the memory of a DeepSpeed-Chat RLHF engine
(actor + ref + critic + reward) across N ranks, stage by stage.

usage:
  python -m rlhf_exp [overrides]              one job: build the engine, record host and GPU memory per stage
  python -m rlhf_exp -m gpus=1,8 loader=naive,staggered
                                              a sweep (add hydra/launcher=rlhf_slurm to submit it to SLURM)
  python -m rlhf_exp plan [overrides]         the memory plan of a config, nothing loaded
  python -m rlhf_exp report <sweep or run dir> an HTML comparison of the results
  python -m rlhf_exp --hydra-help             Hydra's own flags (--cfg job, --info, ...)
"""


def _first_comment(group: str, option: str) -> str:
    """The option file's first comment line: what it is, in its author's words."""
    for line in (CONF_DIR / group / f"{option}.yaml").read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def _describe(group: str, option: str) -> str:
    if group == "loader":
        return LOADERS[option].summary if option in LOADERS else "the fastest loader whose plan fits (planner)"
    return _first_comment(group, option)


def help_text() -> str:
    lines = [USAGE, "config groups (group=option):"]
    for group in GROUPS:
        lines.append(f"  {group}:")
        options = group_choices(group)
        if group == "loader":  # auto last: it picks among the others
            options = [o for o in options if o != AUTO] + [AUTO]
        for option in options:
            lines.append(f"    {option:16s} {_describe(group, option)}")
    lines += ["", "keys (key=value), as rlhf_exp/config/conf/config.yaml sets them:", *_top_level_keys()]
    return "\n".join(lines)


def _top_level_keys() -> list[str]:
    """config.yaml's own keys with their comments: between the defaults list and Hydra's node."""
    text = (CONF_DIR / f"{CONFIG_NAME}.yaml").read_text().split("\nhydra:", 1)[0]
    body = text.split("  - _self_\n", 1)[-1]
    return ["  " + line for line in body.strip("\n").splitlines()]
