"""Layers import only downward: planner.cli > policies > planner > providers > specs.

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

PACKAGES = ("specs", "providers", "planner", "policies")


def is_cli_module(module: str) -> bool:
    """The command line sits on top of everything: the `planner.cli` package (the command
    group, the command families, shared options and output) and `planner.entry`."""
    return module.startswith("planner.cli") or module == "planner.entry"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


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
    top = module.split(".")[0]
    return top if top in PACKAGES else None


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
    assert {name.split(".")[0] for name in MODULES} == set(PACKAGES)


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
    assert layer("planner.cli") == "cli"
    assert layer("planner.cli.options") == "cli"
    assert layer("planner.cli.main") == "cli"
    assert layer("planner.entry") == "cli"
    assert layer("planner.graph") == "planner"
    assert layer("providers.local") == "providers"
    assert layer("click") is None


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    module = tmp_path / "fake.py"
    module.write_text("from ..graph import build_graph\nfrom . import style\n", encoding="utf-8")
    assert imported_modules("planner.render.fake", module) == {
        "planner.graph",
        "planner.graph.build_graph",
        "planner.render",
        "planner.render.style",
    }
    package = tmp_path / "__init__.py"
    package.write_text("from .graph import build_graph\n", encoding="utf-8")
    assert "planner.graph" in imported_modules("planner", package)


IMPORT_EACH = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in {packages!r}]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{{name}}: {{type(exc).__name__}}: {{exc}}")
print("\\n".join(failed))
"""


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_imports_on_its_own(package: str) -> None:
    names = sorted(name for name in MODULES if name.split(".")[0] == package)
    script = IMPORT_EACH.format(packages=set(PACKAGES))
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
