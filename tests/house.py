"""The house rules of trainform's source, read from the code with `ast` (nothing is imported).

The six code folders are layers, bottom to top: runtime -> specs -> providers -> planner ->
policies -> cli (`runtime` is what training processes import: the standard library only).
The rules `tests/test_layering.py` holds on the tree (and on small trees of its own that
break each one):

- a module imports only from its own layer or the ones below it;
- modules import each other in no circle (a function-level import counts: it is still a
  dependency, only a later one);
- no module takes another module's private (`_name`) names, by `from x import _name` or by
  reaching for `something._name` that the module itself does not define;
- no function is longer than `MAX_FUNCTION_LINES`, no module longer than `MAX_MODULE_LINES`.

Every breach is a line `file:line: what`, so a failure says where to look.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

LAYERS = ("runtime", "specs", "providers", "planner", "policies", "cli")
NAMESPACE = "trainform"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
# The public API of namedtuples: underscored so as not to clash with field names.
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


@dataclass(frozen=True)
class ImportEdge:
    target: str
    name: str | None
    line: int


@dataclass
class Module:
    name: str
    path: Path
    relative: str
    tree: ast.Module
    line_count: int
    imports: list[ImportEdge] = field(default_factory=list)

    @property
    def layer(self) -> str:
        return self.name.split(".")[1]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([NAMESPACE, *parts])


def read_tree(root: Path, layers: tuple[str, ...] = LAYERS) -> dict[str, Module]:
    """Every module of the layer folders under `root`, parsed, its imports resolved."""
    found: dict[str, Module] = {}
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            name = module_name(root, path)
            module = Module(
                name=name,
                path=path,
                relative=path.relative_to(root).as_posix(),
                tree=ast.parse(text, filename=str(path)),
                line_count=len(text.splitlines()),
            )
            module.imports = list(import_statements(module))
            found[name] = module
    return found


def import_statements(module: Module) -> Iterator[ImportEdge]:
    """Each imported name with the absolute module it comes from (relative imports
    resolved); `name` is None for `import x.y`."""
    is_package = module.path.name == "__init__.py"
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield ImportEdge(alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join([*base, node.module] if node.module else base)
            else:
                prefix = node.module or ""
            for alias in node.names:
                yield ImportEdge(prefix, alias.name, node.lineno)


def imported_modules(module: Module) -> set[str]:
    """Absolute names of every module (and module attribute) `module` imports."""
    result: set[str] = set()
    for edge in module.imports:
        result.add(edge.target)
        if edge.name is not None:
            result.add(f"{edge.target}.{edge.name}")
    return result


def layer_of(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != NAMESPACE or parts[1] not in LAYERS:
        return None
    return parts[1]


def upward_imports(modules: dict[str, Module]) -> list[str]:
    breaches = []
    for module in modules.values():
        own = LAYERS.index(module.layer)
        for edge in module.imports:
            target = layer_of(edge.target)
            if target is not None and LAYERS.index(target) > own:
                breaches.append(
                    f"{module.relative}:{edge.line}: {module.name} ({module.layer}) imports "
                    f"{edge.target} from the layer above it ({target})"
                )
    return breaches


def resolved_target(modules: dict[str, Module], edge: ImportEdge) -> str | None:
    """The module of the tree an import loads: `from pkg import mod` is `pkg.mod`."""
    if edge.name is not None and f"{edge.target}.{edge.name}" in modules:
        return f"{edge.target}.{edge.name}"
    parts = edge.target.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph(modules: dict[str, Module]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module in modules.values():
        for edge in module.imports:
            target = resolved_target(modules, edge)
            if target is not None and target != module.name and not graph.has_edge(
                module.name, target
            ):
                graph.add_edge(module.name, target, line=edge.line)
    return graph


def import_circles(modules: dict[str, Module]) -> list[str]:
    """One circle per group of modules that import each other, each step file:line."""
    graph = import_graph(modules)
    breaches = []
    for group in nx.strongly_connected_components(graph):
        if len(group) < 2:
            continue
        cycle = nx.find_cycle(graph.subgraph(group))
        steps = [
            f"{modules[source].relative}:{graph.edges[source, target]['line']} imports "
            f"{target}"
            for source, target in cycle
        ]
        breaches.append("import circle: " + "; ".join(steps))
    return sorted(breaches)


def defined_names(tree: ast.Module) -> set[str]:
    """Every name the module itself defines or assigns, at any depth (functions, classes,
    assignments, attributes it sets, parameters, keyword arguments)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
    return names


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def foreign_import_aliases(module: Module) -> set[str]:
    """Names bound by imports of modules outside trainform (`os` in `os._exit`)."""
    aliases = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != NAMESPACE:
                    aliases.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if (node.module or "").split(".")[0] != NAMESPACE:
                aliases.update(alias.asname or alias.name for alias in node.names)
    return aliases


def private_names_taken(modules: dict[str, Module]) -> list[str]:
    breaches = []
    for module in modules.values():
        for edge in module.imports:
            if (
                edge.name is not None
                and is_private(edge.name)
                and layer_of(edge.target) is not None
                and edge.target != module.name
            ):
                breaches.append(
                    f"{module.relative}:{edge.line}: imports the private name "
                    f"{edge.name} of {edge.target}"
                )
        own = defined_names(module.tree)
        foreign = foreign_import_aliases(module)
        for node in ast.walk(module.tree):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            base = node.value
            if isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in foreign):
                continue
            if node.attr in own or node.attr in NAMEDTUPLE_API:
                continue
            breaches.append(
                f"{module.relative}:{node.lineno}: uses {ast.unparse(node)}, a private name "
                "this module does not define"
            )
    return breaches


def long_functions(modules: dict[str, Module], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    breaches = []
    for module in modules.values():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    breaches.append(
                        f"{module.relative}:{node.lineno}: function {node.name} is "
                        f"{length} lines (at most {limit})"
                    )
    return breaches


def long_modules(modules: dict[str, Module], limit: int = MAX_MODULE_LINES) -> list[str]:
    return [
        f"{module.relative}:1: module is {module.line_count} lines (at most {limit})"
        for module in modules.values()
        if module.line_count > limit
    ]
