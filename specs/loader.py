"""Loading a spec folder: files -> documents -> templates -> models -> resolved resources.

`load_specs` is the one entry point. It never stops at the first problem: every file is
read, every document validated, every reference resolved, and all diagnostics are raised
together in one `SpecLoadError`, sorted by file and line. On success it returns a
`SpecSet`. Only `SpecError` subclasses leave this module.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from specs.code_sources import check_code_sources
from specs.data_sources import check_data_sources
from specs.errors import Diagnostic, Location, Severity, SpecLoadError, SpecUsageError
from specs.models.base import Scope
from specs.models.config import RootConfig
from specs.models.kinds import DOCUMENT_ADAPTER, KINDS
from specs.references import Declared, cycle_diagnostic, find_cycles, resolve_references
from specs.resource import Resource, SpecSet
from specs.suggest import closest_name
from specs.templating import NestingTooDeep, has_template, render_document
from specs.validation import diagnostics_from_errors, format_path
from specs.yamlio import ParsedFile, nesting_error, parse_file, too_deep

CONFIG_FILE = "trainform.yaml"
SPEC_SUFFIXES = (".yaml", ".yml")


def discover_files(root: Path) -> list[Path]:
    """Spec files under `root`, recursively, in a stable order; hidden folders skipped."""
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in files:
            if name.endswith(SPEC_SUFFIXES) and not name.startswith("."):
                path = Path(directory, name)
                if path.parent == root and name == CONFIG_FILE:
                    continue
                found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


class _Sources:
    """Parsed files and their lazily built source maps, keyed by display path."""

    def __init__(self) -> None:
        self.files: dict[str, ParsedFile] = {}
        self._maps: dict[tuple[str, int], Any] = {}

    def add(self, parsed: ParsedFile) -> None:
        self.files[parsed.display] = parsed

    def locate(self, display: str, index: int, path: Sequence[str | int], key: bool) -> Location:
        """Position of `path` in document `index` of a file, re-reading only that document."""
        from specs.positions import SourceMap

        parsed = self.files[display]
        if index not in parsed.indices:
            whole = self._maps.setdefault((display, -1), SourceMap(parsed.text))
            line, column = whole.locate(index, path, key, 1)
            return Location(display, line, column)
        position = parsed.indices.index(index)
        start_line = parsed.start_lines[position]
        source_map = self._maps.get((display, index))
        if source_map is None:
            begin, end = parsed.spans[position]
            source_map = self._maps[(display, index)] = SourceMap(parsed.text[begin:end])
        line, column = source_map.locate(0, path, key, 1)
        return Location(display, line + start_line - 1, column)


def _display(root_display: str, path: Path, root: Path) -> str:
    return os.path.normpath(os.path.join(root_display, path.relative_to(root).as_posix()))


def _parse_variables(pairs: Iterable[str]) -> dict[str, str]:
    result = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise SpecUsageError(f"cannot parse --var {pair!r}: expected NAME=VALUE")
        result[name.strip()] = value
    return result


def load_specs(
    folder: str | os.PathLike[str],
    *,
    environment: str | None = None,
    variables: Iterable[str] | Mapping[str, Any] = (),
    var_files: Sequence[str | os.PathLike[str]] = (),
) -> SpecSet:
    """Load, validate and resolve the specs under `folder`; raise SpecLoadError on errors."""
    # Everything loaded stays alive until the end, so cyclic garbage collection would only
    # rescan a growing heap (a third of the run time at 10,000 resources).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load_specs(folder, environment, variables, var_files)
    finally:
        if collecting:
            gc.enable()


def _load_specs(
    folder: str | os.PathLike[str],
    environment: str | None,
    variables: Iterable[str] | Mapping[str, Any],
    var_files: Sequence[str | os.PathLike[str]],
) -> SpecSet:
    root = Path(folder)
    if not root.is_dir():
        raise SpecUsageError(f"cannot load specs: {folder} is not a folder")
    root_display = os.path.normpath(str(folder))
    sources = _Sources()
    diagnostics: list[Diagnostic] = []

    config = _load_config(root, root_display, sources, diagnostics)
    env_name, context = _template_context(config, environment, variables, var_files, diagnostics)

    resources: dict[str, Resource] = {}
    declared: set[tuple[str, str | None, str]] = set()
    files = discover_files(root)
    displays = []
    for path in files:
        display = _display(root_display, path, root)
        displays.append(display)
        parsed = parse_file(path, display)
        sources.add(parsed)
        diagnostics += parsed.diagnostics
        for document, index, start, templated in zip(
            parsed.documents, parsed.indices, parsed.start_lines, parsed.templated, strict=True
        ):
            if parsed.salvaged:
                _declare(document, declared)
                continue
            _load_document(
                document,
                display,
                index,
                start,
                templated,
                context,
                sources,
                resources,
                declared,
                diagnostics,
            )

    def locate(resource: Resource, path: tuple[str | int, ...]) -> Location:
        return sources.locate(resource.location.file, resource.document_index, path, False)

    if config is not None:
        diagnostics += resolve_references(resources, Declared(frozenset(declared)), config, locate)
        diagnostics += check_code_sources(resources, config, root, locate)
        diagnostics += check_data_sources(resources, config, root, locate)
        diagnostics += [
            cycle_diagnostic(cycle, resources, locate) for cycle in find_cycles(resources)
        ]
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]
    if errors or config is None:
        raise SpecLoadError(diagnostics)
    warnings = sorted(diagnostics, key=Diagnostic.sort_key)
    return SpecSet(root, config, env_name, resources, displays, warnings)


def _load_config(
    root: Path, root_display: str, sources: _Sources, diagnostics: list[Diagnostic]
) -> RootConfig | None:
    path = root / CONFIG_FILE
    if not path.exists():
        return RootConfig(api_version="trainform/v1")
    display = _display(root_display, path, root)
    parsed = parse_file(path, display)
    sources.add(parsed)
    diagnostics += parsed.diagnostics
    if parsed.diagnostics:
        return None
    if parsed.documents and too_deep(parsed.documents[0]):
        diagnostics.append(nesting_error(display, parsed.start_lines[0]))
        return None
    if len(parsed.documents) != 1 or not isinstance(parsed.documents[0], dict):
        diagnostics.append(
            Diagnostic(
                Severity.ERROR,
                "not-a-mapping",
                f"{CONFIG_FILE} must hold exactly one mapping",
                Location(display, 1, 1),
            )
        )
        return None
    try:
        return RootConfig.model_validate(parsed.documents[0])
    except ValidationError as exc:
        diagnostics += diagnostics_from_errors(
            exc.errors(include_url=False),
            RootConfig,
            lambda p, key: sources.locate(display, 0, p, key),
            strip_tag=False,
        )
        return None


def _template_context(
    config: RootConfig | None,
    environment: str | None,
    variables: Iterable[str] | Mapping[str, Any],
    var_files: Sequence[str | os.PathLike[str]],
    diagnostics: list[Diagnostic],
) -> tuple[str | None, dict[str, Any]]:
    context: dict[str, Any] = {}
    env_name = environment
    if config is not None:
        context.update(config.variables)
        env_name = environment or config.default_environment
        if env_name is not None:
            if env_name not in config.environments:
                known = sorted(config.environments)
                suggestion = closest_name(env_name, known)
                hint = f" (did you mean `{suggestion}`?)" if suggestion else ""
                raise SpecUsageError(
                    f"cannot select environment `{env_name}`: not declared in {CONFIG_FILE}"
                    f"{hint}; declared: {', '.join(known) or 'none'}"
                )
            context.update(config.environments[env_name].variables)
    for var_file in var_files:
        parsed = parse_file(Path(var_file), os.fspath(var_file))
        diagnostics += parsed.diagnostics
        for document in parsed.documents:
            if too_deep(document):
                raise SpecUsageError(f"cannot read --var-file {var_file}: nested too deeply")
            if not isinstance(document, dict):
                raise SpecUsageError(f"cannot read --var-file {var_file}: expected a mapping")
            context.update(document)
    context.update(variables if isinstance(variables, Mapping) else _parse_variables(variables))
    context.setdefault("environment", env_name)
    return env_name, context


def _load_document(
    document: Any,
    display: str,
    index: int,
    start: int,
    templated: bool,
    context: dict[str, Any],
    sources: _Sources,
    resources: dict[str, Resource],
    declared: set[tuple[str, str | None, str]],
    diagnostics: list[Diagnostic],
) -> None:
    def locate(path: Sequence[str | int], key: bool = False) -> Location:
        return sources.locate(display, index, path, key)

    if not isinstance(document, dict):
        diagnostics.append(
            Diagnostic(
                Severity.ERROR,
                "not-a-mapping",
                "a spec document must be a mapping",
                Location(display, start, 1),
                expected="apiVersion, kind, metadata and spec",
                found="a list" if isinstance(document, list) else repr(document)[:60],
            )
        )
        return
    if templated:
        try:
            document, problems = render_document(document, context)
        except NestingTooDeep:
            diagnostics.append(nesting_error(display, start))
            return
        if problems:
            _declare(document, declared)
            for problem in problems:
                diagnostics.append(_template_diagnostic(problem, context, locate))
            return
    try:
        resource_model = DOCUMENT_ADAPTER.validate_python(document)
    except ValidationError as exc:
        _declare(document, declared)
        if too_deep(document):
            diagnostics.append(nesting_error(display, start))
            return
        kind, project, name = _identity(document)
        model = KINDS.get(kind) if isinstance(kind, str) else None
        address = f"{kind}/{project}/{name}" if project else f"{kind}/{name}"
        diagnostics += diagnostics_from_errors(
            exc.errors(include_url=False), model, locate, address if model else ""
        )
        return
    resource = Resource(resource_model.address, resource_model, Location(display, start, 1), index)
    scope_problem = _check_scope(resource, locate)
    if scope_problem:
        _declare(document, declared)
        diagnostics.append(scope_problem)
        return
    existing = resources.get(resource.address)
    if existing is not None:
        first_at = sources.locate(
            existing.location.file, existing.document_index, ("metadata", "name"), False
        )
        diagnostics.append(
            Diagnostic(
                Severity.ERROR,
                "duplicate-name",
                f"{resource.address} is declared twice",
                locate(("metadata", "name")),
                field="metadata.name",
                expected=f"one {resource.kind} named `{resource.name}`"
                + (f" in project `{resource.project}`" if resource.project else ""),
                found=f"a second declaration (the first is at {first_at})",
                address=resource.address,
                related=(first_at,),
            )
        )
        return
    resources[resource.address] = resource


def _declare(document: Any, declared: set[tuple[str, str | None, str]]) -> None:
    """Remember the name a document declares, so references to it are not reported as
    unknown when the document itself failed (its own diagnostic says why)."""
    if isinstance(document, dict):
        kind, project, name = _identity(document)
        if kind and name and not has_template(name) and not has_template(project or ""):
            declared.add((kind, project, name))


def _identity(document: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    kind = document.get("kind")
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return (kind if isinstance(kind, str) else None), None, None
    project, name = metadata.get("project"), metadata.get("name")
    return (
        kind if isinstance(kind, str) else None,
        project if isinstance(project, str) else None,
        name if isinstance(name, str) else None,
    )


def _check_scope(resource: Resource, locate: Any) -> Diagnostic | None:
    scope = type(resource.document).scope
    if scope is Scope.PROJECT and resource.project is None:
        return Diagnostic(
            Severity.ERROR,
            "missing-project",
            f"a {resource.kind} belongs to a project: set metadata.project",
            locate(("metadata",)),
            field="metadata.project",
            expected="the name of a Project",
            found="nothing",
            address=resource.address,
        )
    if scope is Scope.GLOBAL and resource.project is not None:
        return Diagnostic(
            Severity.ERROR,
            "project-not-allowed",
            f"a {resource.kind} is global and cannot belong to project `{resource.project}`",
            locate(("metadata", "project")),
            field="metadata.project",
            expected="no project",
            found=resource.project,
            address=resource.address,
        )
    return None


def _template_diagnostic(problem: Any, context: dict[str, Any], locate: Any) -> Diagnostic:
    field = format_path(problem.path)
    if problem.undefined:
        return Diagnostic(
            Severity.ERROR,
            "undefined-variable",
            f"template variable `{problem.undefined}` is not defined",
            locate(problem.path),
            field=field,
            expected="a variable from trainform.yaml (variables or the selected environment), "
            "--var or --var-file",
            found=problem.undefined,
            suggestion=closest_name(problem.undefined, context),
        )
    return Diagnostic(
        Severity.ERROR, "template-error", problem.message, locate(problem.path), field=field
    )
