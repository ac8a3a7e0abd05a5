"""Layers point down: a package imports only packages of its own layer or below (static imports, function-level
ones included). Leaves of data (modules that import nothing of rlhf_exp) may be read from any layer."""

from __future__ import annotations

import ast
from pathlib import Path

import rlhf_exp

PACKAGE = Path(rlhf_exp.__file__).parent
LAYERS = {
    "config": 0,  # settings, torch-free
    "jobdir": 1,  # the job directory's files
    "records": 1,  # the shapes of its events and samples
    "checkpoints": 1,
    "memory": 2,  # kernel and GPU figures, the watcher and its watchdog
    "loaders": 3,
    "plan": 4,
    "report": 5,
    "rank": 6,
    "job": 6,
    "cli": 7,
    "__main__": 8,
}
# leaves of data, read from any layer: the loader declarations (config validates loader.name against them) and
# where a user's checkpoint path points (config checks it where it is validated)
LEAVES = {"rlhf_exp.loaders.registry", "rlhf_exp.checkpoints.locate"}


def imports() -> set[tuple[str, str]]:
    edges = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(("rlhf_exp", *path.relative_to(PACKAGE).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rlhf_exp"):
                edges.add((module, node.module))
            elif isinstance(node, ast.Import):
                edges |= {(module, a.name) for a in node.names if a.name.startswith("rlhf_exp.")}
    return edges


def layer(module: str) -> int:
    if module in LEAVES:
        return 0
    return LAYERS[module.split(".")[1] if "." in module else "__main__"]


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages | {"jobdir", "records", "__main__"} == set(LAYERS)


def test_no_import_points_up() -> None:
    edges = imports()
    assert not [b for a, b in edges if a in LEAVES], "a leaf of data imports nothing of rlhf_exp"
    assert sorted(f"{a} -> {b}" for a, b in edges if layer(b) > layer(a)) == []


def test_the_watcher_and_config_errors_stand_alone() -> None:
    edges = imports()
    assert not [b for a, b in edges if a.startswith("rlhf_exp.memory") and b.startswith("rlhf_exp.job.")]
    assert not [b for a, b in edges if a == "rlhf_exp.config.errors"]


def test_the_readme_layout_names_every_module() -> None:
    readme = (PACKAGE.parent / "README.md").read_text()
    layout = readme[readme.index("## Layout") :]
    layout = layout[: layout.index("```", layout.index("```") + 3)]
    unnamed = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" and p.name not in layout]
    assert unnamed == []
