"""Layers import only downward: planner.cli > policies > planner > providers > specs.

Every layer lives under the `trainform` namespace (`trainform.specs` is the folder
`specs/`), and nothing imports a layout folder by its bare name.

Checked on the source with `ast` (every import statement, including ones inside functions
and `TYPE_CHECKING` blocks), and by importing every module on its own in a fresh
interpreter so no module works only because another was imported first.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

PACKAGES = ("specs", "providers", "planner", "policies", "cli")
NAMESPACE = "trainform"


def is_cli_module(module: str) -> bool:
    """The command line sits on top of everything: the `cli` package (the command
    group, the command families, shared options and output) and `cli.entry`."""
    return module.startswith("trainform.cli") or module == "trainform.cli.entry"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([NAMESPACE, *parts])


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def imported_modules(name: str, path: Path) -> set[str]:
    """Absolute names of every module `path` imports, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    result: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            result.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join([*base, node.module] if node.module else base)
            else:
                prefix = node.module or ""
            result.add(prefix)
            result.update(f"{prefix}.{alias.name}" for alias in node.names)
    return result


def layer(module: str) -> str | None:
    if is_cli_module(module):
        return "cli"
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != NAMESPACE:
        return None
    return parts[1] if parts[1] in PACKAGES else None


def package_of(module: str) -> str:
    return module.split(".")[1]


# What each layer must not import.
FORBIDDEN = {
    "specs": {"providers", "planner", "policies", "cli"},
    "providers": {"planner", "policies", "cli"},
    "planner": {"policies", "cli"},
    "policies": {"cli"},
    "cli": set(),
}

MODULES = modules()


def test_every_package_has_modules() -> None:
    assert {package_of(name) for name in MODULES} == set(PACKAGES)


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
                if name.split(".")[0] in PACKAGES
            ]
    assert bare == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_imports_only_downward(name: str) -> None:
    own = layer(name)
    assert own is not None
    upward = sorted(
        imported
        for imported in imported_modules(name, MODULES[name])
        if layer(imported) in FORBIDDEN[own]
    )
    assert upward == [], f"{name} ({own}) imports from a higher layer"


def test_layer_of_cli_modules_is_cli() -> None:
    assert layer("trainform.cli") == "cli"
    assert layer("trainform.cli.options") == "cli"
    assert layer("trainform.cli.main") == "cli"
    assert layer("trainform.cli.entry") == "cli"
    assert layer("trainform.planner.graph") == "planner"
    assert layer("trainform.providers.local") == "providers"
    assert layer("click") is None
    assert layer("planner.graph") is None


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    module = tmp_path / "fake.py"
    module.write_text("from ..graph import build_graph\nfrom . import style\n", encoding="utf-8")
    assert imported_modules("trainform.cli.render.fake", module) == {
        "trainform.planner.graph",
        "trainform.planner.graph.build_graph",
        "trainform.cli.render",
        "trainform.cli.render.style",
    }
    package = tmp_path / "__init__.py"
    package.write_text("from .graph import build_graph\n", encoding="utf-8")
    assert "trainform.planner.graph" in imported_modules("trainform.planner", package)


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


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_imports_on_its_own(package: str) -> None:
    names = sorted(name for name in MODULES if package_of(name) == package)
    script = IMPORT_EACH
    result = subprocess.run(
        [sys.executable, "-c", script, *names],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == ""
