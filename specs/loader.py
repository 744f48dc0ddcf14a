"""Loading a spec folder: files -> documents -> templates -> models -> resolved resources.

`load_specs` is the one entry point. It never stops at the first problem: every file is
read, every document validated, every reference resolved, and all diagnostics are raised
together in one `SpecLoadError`, sorted by file and line. On success it returns a
`SpecSet`. Only `SpecError` subclasses leave this module.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from trainform.specs.code_sources import check_code_sources
from trainform.specs.data_sources import check_data_sources
from trainform.specs.discovery import CONFIG_FILE, find_spec_files, missing_config, refused_file
from trainform.specs.environments import check_environments, environment_config
from trainform.specs.errors import (
    MAX_DIAGNOSTICS_PER_FILE,
    Diagnostic,
    Location,
    Severity,
    SpecLoadError,
    SpecUsageError,
    cap_per_file,
)
from trainform.specs.event_budget import EventBudget
from trainform.specs.models.base import Scope
from trainform.specs.models.config import RootConfig
from trainform.specs.models.kinds import DOCUMENT_ADAPTER, KINDS
from trainform.specs.references import Declared, cycle_diagnostic, find_cycles, resolve_references
from trainform.specs.resource import Resource, SpecSet, TemplatedDocument
from trainform.specs.split_work import both, can_split, in_background
from trainform.specs.suggest import closest_name
from trainform.specs.template_rendering import render_document
from trainform.specs.templating import NestingTooDeep, RenderBudget, has_template
from trainform.specs.validation import diagnostics_from_errors, format_path, number_warnings
from trainform.specs.yamlio import (
    MAX_DOCUMENT_VALUES,
    ParsedFile,
    count_values,
    nesting_error,
    numbers_read_as_written,
    parse_file,
    prune,
    too_deep,
)

SCAN_EVENTS = 10_000
"""YAML events one load may walk for the checks of tags and numbers (specs.positions)."""
LARGE_DOCUMENT_CHARS = 64 * 1024
"""Documents longer than this have their values counted before validation."""
MAX_BUILT_ERRORS = 1_000
"""A document with more validation errors has only its first ones turned into diagnostics."""


def discover_files(root: Path, refused: list[Diagnostic] | None = None) -> list[Path]:
    """Spec files under `root`, recursively, in a stable order; hidden entries skipped.

    Links leaving the folder and special files are left out, each with a diagnostic added
    to `refused` (specs.discovery says why); none of them is ever opened.
    """
    found, problems = find_spec_files(root, os.path.normpath(str(root)))
    if refused is not None:
        refused += problems
    return found


class _Sources:
    """Parsed files and their lazily built source maps, keyed by display path."""

    def __init__(self) -> None:
        self.files: dict[str, ParsedFile] = {}
        self._maps: dict[tuple[str, int], Any] = {}
        self._walks: dict[tuple[str, int], Any] = {}
        self.scan = EventBudget(SCAN_EVENTS)

    def add(self, parsed: ParsedFile) -> None:
        self.files[parsed.display] = parsed

    def locate(self, display: str, index: int, path: Sequence[str | int], key: bool) -> Location:
        """Position of `path` in document `index` of a file, re-reading only that document."""
        from trainform.specs.positions import source_map as new_map

        parsed = self.files[display]
        if index not in parsed.indices:
            whole = self._maps.get((display, -1))
            if whole is None:
                whole = self._maps[(display, -1)] = new_map(parsed.text, parsed.salvaged)
            line, column = whole.locate(index, path, key, 1)
            return Location(display, line, column)
        position = parsed.indices.index(index)
        start_line = parsed.start_lines[position]
        source_map = self._maps.get((display, index))
        if source_map is None:
            begin, end = parsed.spans[position]
            source_map = self._maps[(display, index)] = new_map(
                parsed.text[begin:end], parsed.salvaged
            )
        line, column = source_map.locate(0, path, key, 1)
        return Location(display, line + start_line - 1, column)

    def written(
        self, display: str, index: int, path: Sequence[str | int]
    ) -> tuple[str | None, Location] | None:
        """The value at `path` in document `index` as written: its text if it is a plain
        scalar, and its location; None if the path is not found."""
        from trainform.specs.positions import EventMap

        parsed = self.files[display]
        if index not in parsed.indices:
            return None
        position = parsed.indices.index(index)
        walker = self._walks.get((display, index))
        if walker is None:
            begin, end = parsed.spans[position]
            walker = EventMap(parsed.text[begin:end], budget=self.scan)
            self._walks[(display, index)] = walker
        node = walker.node(0, path)
        if node is None:
            return None
        line = parsed.start_lines[position] + node.line - 1
        return node.plain, Location(display, line, node.column)


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

    uncounted: dict[str, int] = {}
    config = base_config = _load_config(root, root_display, sources, diagnostics, uncounted)
    env_name, context = template_context(config, environment, variables, var_files, diagnostics)
    if config is not None:
        config_display = _display(root_display, root / CONFIG_FILE, root)
        isolation = check_environments(
            config, root, lambda path, key: sources.locate(config_display, 0, path, key)
        )
        diagnostics += isolation
        config = None if isolation else environment_config(config, env_name)

    resources: dict[str, Resource] = {}
    templates: list[TemplatedDocument] = []
    declared: set[tuple[str, str | None, str]] = set()
    budget = RenderBudget()
    files = discover_files(root, diagnostics)
    displays = [_display(root_display, path, root) for path in files]
    for display, parsed in zip(displays, _parsed_files(files, displays, sources.scan), strict=True):
        sources.add(parsed)
        first = len(diagnostics)
        diagnostics += parsed.diagnostics
        failing, counted = False, first  # an error among the file's diagnostics so far
        for position, (document, index, start, templated) in enumerate(
            zip(parsed.documents, parsed.indices, parsed.start_lines, parsed.templated, strict=True)
        ):
            if len(diagnostics) != counted:
                failing = failing or any(
                    d.severity is Severity.ERROR for d in diagnostics[counted:]
                )
                counted = len(diagnostics)
            hidden = _load_document(
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
                load=not parsed.salvaged,
                budget=budget,
                room=MAX_DIAGNOSTICS_PER_FILE - (counted - first),
                failing=failing,
                span=parsed.spans[position],
            )
            if hidden:
                uncounted[display] = uncounted.get(display, 0) + hidden
            if templated:
                templates.append(TemplatedDocument(display, index, start, document))

    def locate(resource: Resource, path: tuple[str | int, ...]) -> Location:
        return sources.locate(resource.location.file, resource.document_index, path, False)

    if config is not None:
        checked = config  # for the closures: mypy does not narrow `config` inside them
        references, sources_found = both(
            lambda: resolve_references(resources, Declared(frozenset(declared)), checked, locate),
            lambda: (
                check_code_sources(resources, checked, root, locate)
                + check_data_sources(resources, checked, root, locate)
            ),
            len(resources),
        )
        diagnostics += references + sources_found
        diagnostics += [
            cycle_diagnostic(cycle, resources, locate) for cycle in find_cycles(resources)
        ]
    diagnostics = cap_per_file(diagnostics, uncounted)
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]
    if errors or config is None:
        raise SpecLoadError(diagnostics)
    warnings = sorted(diagnostics, key=Diagnostic.sort_key)
    return SpecSet(root, config, env_name, resources, displays, warnings, base_config, templates)


SPLIT_BYTES = 1 << 20
"""Spec files of at least this many bytes in all are parsed on two cores."""


def _parsed_files(
    files: Sequence[Path], displays: Sequence[str], scan: EventBudget
) -> Iterator[ParsedFile]:
    """Every file parsed, in order. A large set has its second half parsed by a forked
    child (specs.split_work) while the caller loads the first. The child's files are kept
    only if it never needed the shared scan budget (a tag or number walk): then parsing
    them here, after the first half, would have given the same result."""
    half = len(files) // 2
    size = _total_size(files) if half else 0
    if not can_split(size, SPLIT_BYTES):
        for path, display in zip(files, displays, strict=True):
            yield parse_file(path, display, scan)
        return

    rest = list(zip(files[half:], displays[half:], strict=True))

    def second_half() -> tuple[list[ParsedFile], bool]:
        own = EventBudget(scan.events)
        parsed = [parse_file(path, display, own) for path, display in rest]
        for item in parsed:
            item.scan = None
        return parsed, own.events != scan.events

    with in_background(second_half, size, SPLIT_BYTES) as theirs:
        for path, display in zip(files[:half], displays[:half], strict=True):
            yield parse_file(path, display, scan)
        parsed, scanned = theirs()
    if scanned:
        parsed = [parse_file(path, display, scan) for path, display in rest]
    for item in parsed:
        item.scan = scan
        yield item


def _total_size(files: Sequence[Path]) -> int:
    total = 0
    for path in files:
        try:
            total += path.stat().st_size
        except OSError:
            continue  # parse_file reports it
    return total


def _load_config(
    root: Path,
    root_display: str,
    sources: _Sources,
    diagnostics: list[Diagnostic],
    uncounted: dict[str, int] | None = None,
) -> RootConfig | None:
    path = root / CONFIG_FILE
    if not path.exists() and not path.is_symlink():
        diagnostics.append(missing_config(root_display))
        return None
    display = _display(root_display, path, root)
    refused = refused_file(path, root, display)
    if refused is not None:
        diagnostics.append(refused)
        return None
    parsed = parse_file(path, display, sources.scan)
    sources.add(parsed)
    diagnostics += parsed.diagnostics
    # A duplicate key or a refused tag: the file is still validated for its other errors.
    failed = any(d.severity is Severity.ERROR for d in parsed.diagnostics)
    if failed and not parsed.salvaged:
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
    document = parsed.documents[0]

    def written(path: Sequence[str | int]) -> tuple[str | None, Location] | None:
        return sources.written(display, 0, path)

    environments = document.get("environments")
    roots: list[tuple[str, ...]] = [("variables",)]
    if isinstance(environments, dict):
        roots += [("environments", name, "variables") for name in environments]
    for root in roots:
        mapping: Any = document
        for step in root:
            mapping = mapping.get(step) if isinstance(mapping, dict) else None
        if isinstance(mapping, dict) and not numbers_read_as_written(
            parsed.text, 0, len(parsed.text), mapping
        ):
            diagnostics += number_warnings(document, [root], written)
    try:
        config = RootConfig.model_validate(document)
    except ValidationError as exc:
        errors, hidden = _first_errors(
            exc, RootConfig.model_validate, document, MAX_DIAGNOSTICS_PER_FILE
        )
        diagnostics += diagnostics_from_errors(
            errors,
            RootConfig,
            lambda p, key: sources.locate(display, 0, p, key),
            strip_tag=False,
            written=written,
        )
        if hidden and uncounted is not None:
            uncounted[display] = uncounted.get(display, 0) + hidden
        return None
    return None if failed else config


def template_context(
    config: RootConfig | None,
    environment: str | None,
    variables: Iterable[str] | Mapping[str, Any],
    var_files: Sequence[str | os.PathLike[str]],
    diagnostics: list[Diagnostic],
) -> tuple[str | None, dict[str, Any]]:
    """The selected environment (`environment`, else the default one) and what templates
    see: trainform.yaml's variables, the environment's, --var-file, then --var."""
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
    *,
    load: bool = True,
    budget: RenderBudget | None = None,
    room: int = MAX_DIAGNOSTICS_PER_FILE,
    failing: bool = False,
    span: tuple[int, int] = (0, 0),
) -> int:
    """Validate one document and keep it as a resource (unless `load` is False: it comes
    from a file with a duplicate key or a refused tag). At most `room` diagnostics are
    built; returns how many problems were only counted. `failing`: its file already has
    an error, so past `room` only the document's beginning is checked."""

    def locate(path: Sequence[str | int], key: bool = False) -> Location:
        return sources.locate(display, index, path, key)

    def written(path: Sequence[str | int]) -> tuple[str | None, Location] | None:
        return sources.written(display, index, path)

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
        return 0
    if templated:
        try:
            document, problems = render_document(document, context, budget)
        except NestingTooDeep:
            diagnostics.append(nesting_error(display, start))
            return 0
        if problems:
            _declare(document, declared)
            for problem in problems:
                diagnostics.append(_template_diagnostic(problem, context, locate))
            return 0
    checked = document
    if span[1] - span[0] > LARGE_DOCUMENT_CHARS:
        values = count_values(document, MAX_DOCUMENT_VALUES)
        if values > MAX_DOCUMENT_VALUES:
            diagnostics.append(_too_large(display, start))
            load, failing = False, True
            checked = prune(document, MAX_BUILT_ERRORS)
    if room <= 0 and failing:
        checked = prune(document, MAX_BUILT_ERRORS)
    spec = document.get("spec")
    parameters = spec.get("parameters") if type(spec) is dict else None
    if not templated and room > 0 and type(parameters) is dict and parameters:
        text = sources.files[display].text
        anchor = text.find("parameters:", span[0], span[1])
        if not numbers_read_as_written(text, max(anchor, span[0]), span[1], parameters):
            diagnostics += number_warnings(document, [("spec", "parameters")], written)
    try:
        resource_model = DOCUMENT_ADAPTER.validate_python(checked)
    except ValidationError as exc:
        _declare(document, declared)
        if too_deep(document):
            diagnostics.append(nesting_error(display, start))
            return 0
        kind, project, name = _identity(document)
        model = KINDS.get(kind) if isinstance(kind, str) else None
        address = f"{kind}/{project}/{name}" if project else f"{kind}/{name}"
        errors, hidden = _first_errors(exc, DOCUMENT_ADAPTER.validate_python, checked, room)
        diagnostics += diagnostics_from_errors(
            errors, model, locate, address if model else "", written=written
        )
        return hidden
    if checked is not document:
        _declare(document, declared)
        return 0
    resource = Resource(
        resource_model.address, resource_model, Location(display, start, 1), index, [], templated
    )
    scope_problem = _check_scope(resource, locate)
    if scope_problem:
        _declare(document, declared)
        diagnostics.append(scope_problem)
        return 0
    if not load:
        _declare(document, declared)
        return 0
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
        return 0
    resources[resource.address] = resource
    return 0


def _first_errors(
    exc: ValidationError, validate: Callable[[Any], Any], document: Any, room: int
) -> tuple[list[Any], int]:
    """The errors to turn into diagnostics (at most `room`) and how many are left over.

    pydantic builds a dict per error; for a document with a huge number of them (a list
    of a million wrong values) only its first values are validated again for the ones
    shown (a `missing` field may be an artefact of that cut, so those are not shown).
    """
    count = exc.error_count()
    if room <= 0:
        return [], count
    if count <= MAX_BUILT_ERRORS:
        errors = exc.errors(include_url=False)
    else:
        try:
            validate(prune(document, MAX_BUILT_ERRORS))
            errors = []
        except ValidationError as again:
            errors = [e for e in again.errors(include_url=False) if e["type"] != "missing"]
    shown = errors[:room]
    return shown, count - len(shown)


def _too_large(display: str, line: int) -> Diagnostic:
    return Diagnostic(
        Severity.ERROR,
        "document-too-large",
        "document holds too many values to be a spec document; only its beginning is checked",
        Location(display, line, 1),
        expected=f"at most {MAX_DOCUMENT_VALUES:,} values (keys, items and scalars)",
        found=f"more than {MAX_DOCUMENT_VALUES:,}",
    )


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
    if problem.limit:
        return Diagnostic(
            Severity.ERROR,
            "template-limit",
            problem.message,
            locate(problem.path),
            field=field,
            expected=problem.limit,
            found="more",
            detail="templates in specs are for small substitutions; generate large values "
            "outside the spec or write them out",
        )
    return Diagnostic(
        Severity.ERROR, "template-error", problem.message, locate(problem.path), field=field
    )
