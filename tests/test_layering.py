"""The house holds: layers import only downward (specs -> providers -> planner -> policies
-> cli), no import circles, no private names taken from another module, no function over 80
lines, no module over 600 (the rules and their reading of the code: tests/house.py).

Every layer lives under the `trainform` namespace (`trainform.specs` is the folder
`specs/`), and nothing imports a layout folder by its bare name. Each rule is checked on the
real tree and shown to fail, naming file and line, on a small tree with that one defect;
every module also imports on its own in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import house
from tests.helpers import REPO

MODULES = house.read_tree(REPO)


def test_every_layer_has_modules() -> None:
    assert {module.layer for module in MODULES.values()} == set(house.LAYERS)


def test_no_layer_imports_a_layer_above_it() -> None:
    assert house.upward_imports(MODULES) == []


def test_modules_import_each_other_in_no_circle() -> None:
    assert house.import_circles(MODULES) == []


def test_no_module_takes_a_private_name_of_another() -> None:
    assert house.private_names_taken(MODULES) == []


def test_no_function_is_over_80_lines() -> None:
    assert house.long_functions(MODULES) == []


def test_no_module_is_over_600_lines() -> None:
    assert house.long_modules(MODULES) == []


def python_files() -> list[Path]:
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO / name for name in tracked]


def test_nothing_imports_a_layout_folder_by_its_bare_name() -> None:
    """`import planner` would load a second copy of every module beside `trainform.planner`
    (and, installed, collide with the unrelated PyPI packages of those names)."""
    bare = []
    for path in python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            bare += [
                f"{path.relative_to(REPO)}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[0] in house.LAYERS
            ]
    assert bare == []


# Small trees, each with one defect: the checks must say no, at the right file and line.


def tree_of(root: Path, files: dict[str, str]) -> dict[str, house.Module]:
    for layer in house.LAYERS:
        (root / layer).mkdir(parents=True, exist_ok=True)
        (root / layer / "__init__.py").touch()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return house.read_tree(root)


def test_an_upward_import_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    modules = tree_of(
        tmp_path,
        {
            "planner/plan.py": "import json\nfrom trainform.policies.engine import check\n",
            "policies/engine.py": "from trainform.planner.plan import make_plan\n",
            "providers/local.py": "def later():\n    from ..planner import plan\n",
        },
    )
    assert sorted(house.upward_imports(modules)) == [
        "planner/plan.py:2: trainform.planner.plan (planner) imports "
        "trainform.policies.engine from the layer above it (policies)",
        "providers/local.py:2: trainform.providers.local (providers) imports "
        "trainform.planner from the layer above it (planner)",
    ]


def test_a_circle_between_modules_is_named_step_by_step(tmp_path: Path) -> None:
    modules = tree_of(
        tmp_path,
        {
            "specs/positions.py": "from trainform.specs.yamlio import load\n",
            "specs/yamlio.py": "def load():\n    from . import positions\n",
            "specs/loader.py": "from trainform.specs import yamlio\n",
        },
    )
    (breach,) = house.import_circles(modules)
    assert breach.startswith("import circle: ")
    assert "specs/positions.py:1 imports trainform.specs.yamlio" in breach
    assert "specs/yamlio.py:2 imports trainform.specs.positions" in breach
    assert "loader" not in breach


def test_a_package_that_reexports_its_modules_is_no_circle(tmp_path: Path) -> None:
    modules = tree_of(
        tmp_path,
        {
            "specs/__init__.py": "from trainform.specs.loader import load_specs\n",
            "specs/loader.py": "from trainform.specs.models import Project\n",
            "specs/models.py": "import json\n",
        },
    )
    assert house.import_circles(modules) == []


def test_a_private_name_of_another_module_is_refused(tmp_path: Path) -> None:
    modules = tree_of(
        tmp_path,
        {
            "planner/lockfile.py": "def _git():\n    pass\n",
            "planner/lineage.py": "from trainform.planner.lockfile import _git\n",
            "providers/jobs.py": "class Jobs:\n    def _sacct(self):\n        return self._x\n",
            "providers/history.py": (
                "import os\n"
                "from collections import namedtuple\n"
                "from trainform.providers import mapping\n\n"
                "def read(jobs, row):\n"
                "    os._exit(0)\n"
                "    row._replace(a=1)\n"
                "    return jobs._sacct(), mapping._drift\n"
            ),
            "providers/quantity.py": (
                "class Quantity:\n"
                "    def __init__(self):\n"
                "        self._key = 1\n\n"
                "    def __eq__(self, other):\n"
                "        return self._key == other._key\n"
            ),
        },
    )
    assert sorted(house.private_names_taken(modules)) == [
        "planner/lineage.py:1: imports the private name _git of trainform.planner.lockfile",
        "providers/history.py:8: uses jobs._sacct, a private name this module does not define",
        "providers/history.py:8: uses mapping._drift, a private name this module does not "
        "define",
    ]


def test_a_long_function_and_a_long_module_are_refused(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    modules = tree_of(
        tmp_path,
        {
            "cli/fits.py": "def fits():\n" + "".join(f"    x{i} = {i}\n" for i in range(79)),
            "cli/long.py": "\n\ndef plan_job():\n" + body,
            "specs/big.py": "x = 1\n" * 601,
            "specs/fine.py": "x = 1\n" * 600,
        },
    )
    assert house.long_functions(modules) == [
        "cli/long.py:3: function plan_job is 81 lines (at most 80)"
    ]
    assert house.long_modules(modules) == ["specs/big.py:1: module is 601 lines (at most 600)"]


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    modules = tree_of(
        tmp_path,
        {
            "cli/render/fake.py": "from ...planner.graph import build_graph\nfrom . import style\n",
            "planner/__init__.py": "from .graph import build_graph\n",
        },
    )
    assert house.imported_modules(modules["trainform.cli.render.fake"]) == {
        "trainform.planner.graph",
        "trainform.planner.graph.build_graph",
        "trainform.cli.render",
        "trainform.cli.render.style",
    }
    assert "trainform.planner.graph" in house.imported_modules(modules["trainform.planner"])


def test_layer_of_names() -> None:
    assert house.layer_of("trainform.cli") == "cli"
    assert house.layer_of("trainform.cli.render.style") == "cli"
    assert house.layer_of("trainform.planner.graph") == "planner"
    assert house.layer_of("trainform.providers.local") == "providers"
    assert house.layer_of("click") is None
    assert house.layer_of("planner.graph") is None


IMPORT_EACH = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] == "trainform"]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


@pytest.mark.parametrize("layer", house.LAYERS)
def test_every_module_imports_on_its_own(layer: str) -> None:
    names = sorted(name for name, module in MODULES.items() if module.layer == layer)
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH, *names],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == ""
