"""Loading a spec folder: files -> documents -> templates -> models -> resolved resources.

`load_specs` is the one entry point. It never stops at the first problem: every file is
read, every document validated, every reference resolved, and all diagnostics are raised
together in one `SpecLoadError`, sorted by file and line. On success it returns a
`SpecSet`. Only `SpecError` subclasses leave this module.

The load's steps, one after the other: trainform.yaml and the selected environment, the
documents of every file (each one by specs.document_loading; the parsed files and the
positions in them are specs.loaded_files), then references, sources and cycles.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from trainform.specs.code_sources import check_code_sources
from trainform.specs.data_sources import check_data_sources
from trainform.specs.diagnostic_budget import DiagnosticBudget
from trainform.specs.discovery import (
    CONFIG_FILE,
    display_path,
    find_spec_files,
    missing_config,
    refused_file,
)
from trainform.specs.document_loading import LoadState, first_errors, load_document
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
from trainform.specs.loaded_files import LoadedFiles
from trainform.specs.models.config import RootConfig
from trainform.specs.references import (
    Declared,
    Referrer,
    check_failed_references,
    cycle_diagnostic,
    find_cycles,
    resolve_references,
)
from trainform.specs.resource import SpecSet, TemplatedDocument
from trainform.specs.split_work import both, can_split, in_background
from trainform.specs.suggest import closest_name
from trainform.specs.validation import diagnostics_from_errors, number_warnings
from trainform.specs.yamlio import (
    ParsedFile,
    nesting_error,
    numbers_read_as_written,
    parse_file,
    too_deep,
)


def discover_files(root: Path, refused: list[Diagnostic] | None = None) -> list[Path]:
    """Spec files under `root`, recursively, in a stable order; hidden entries skipped.

    Links leaving the folder and special files are left out, each with a diagnostic added
    to `refused` (specs.discovery says why); none of them is ever opened.
    """
    found, problems = find_spec_files(root, os.path.normpath(str(root)))
    if refused is not None:
        refused += problems
    return found


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
    """The steps of `load_specs`, with cyclic garbage collection off."""
    root = Path(folder)
    if not root.is_dir():
        raise SpecUsageError(f"cannot load specs: {folder} is not a folder")
    root_display = os.path.normpath(str(folder))
    diagnostics = DiagnosticBudget()
    files = LoadedFiles(diagnostics)

    uncounted: dict[str, int] = {}
    base_config = _load_config(root, root_display, files, diagnostics, uncounted)
    env_name, context = template_context(
        base_config, environment, variables, var_files, diagnostics
    )
    config = _select_environment(base_config, env_name, root, root_display, files, diagnostics)
    state = LoadState(context, files, diagnostics)
    refused: list[Diagnostic] = []
    paths = discover_files(root, refused)
    diagnostics.extend(refused)
    displays = [display_path(root_display, path, root) for path in paths]
    templates = _load_files(state, paths, displays, uncounted)
    if config is not None:
        _check_references(state, config, root)
    count_line = diagnostics.count_line()
    shown = cap_per_file(diagnostics.kept, uncounted) + ([count_line] if count_line else [])
    errors = [d for d in shown if d.severity is Severity.ERROR]
    if errors or config is None:
        raise SpecLoadError(shown)
    warnings = sorted(shown, key=Diagnostic.sort_key)
    resources = state.resources
    return SpecSet(root, config, env_name, resources, displays, warnings, base_config, templates)


def _select_environment(
    config: RootConfig | None,
    env_name: str | None,
    root: Path,
    root_display: str,
    files: LoadedFiles,
    diagnostics: DiagnosticBudget,
) -> RootConfig | None:
    """trainform.yaml as the selected environment sees it; None when it did not load or
    its environments are not isolated from each other (each breach a diagnostic)."""
    if config is None:
        return None
    config_display = display_path(root_display, root / CONFIG_FILE, root)
    isolation = check_environments(
        config, root, lambda path, key: files.locate(config_display, 0, path, key)
    )
    diagnostics.extend(isolation)
    return None if isolation else environment_config(config, env_name)


def _load_files(
    state: LoadState, paths: Sequence[Path], displays: Sequence[str], uncounted: dict[str, int]
) -> list[TemplatedDocument]:
    """Every document of every file loaded, in order; returns the templated ones as
    written. Problems past a file's room are counted in `uncounted`, those past the run's
    budget in the budget (whichever room is the smaller)."""
    templates: list[TemplatedDocument] = []
    budget = state.diagnostics
    kept = budget.kept
    parsed_files = _parsed_files(paths, displays, state.files.scan)
    for display, parsed in zip(displays, parsed_files, strict=True):
        state.files.add(parsed)
        first = len(kept)
        budget.extend(parsed.diagnostics)
        failing, counted = False, first  # an error among the file's diagnostics so far
        for position, (document, index, start, templated) in enumerate(
            zip(parsed.documents, parsed.indices, parsed.start_lines, parsed.templated, strict=True)
        ):
            if len(kept) != counted:
                failing = failing or any(d.severity is Severity.ERROR for d in kept[counted:])
                counted = len(kept)
            file_room = MAX_DIAGNOSTICS_PER_FILE - (counted - first)
            by_run = budget.room < file_room
            hidden = load_document(
                state,
                document,
                display,
                index,
                start,
                templated,
                keep=not parsed.salvaged,
                room=min(file_room, budget.room),
                failing=failing,
                span=parsed.spans[position],
            )
            if hidden and by_run:
                budget.omit(hidden)
            elif hidden:
                uncounted[display] = uncounted.get(display, 0) + hidden
            if templated:
                templates.append(TemplatedDocument(display, index, start, document))
        state.files.fit_to_budget()  # no re-read for a position that would not be shown
    return templates


def _check_references(state: LoadState, config: RootConfig, root: Path) -> None:
    """The diagnostics of references (resolved while a forked child checks code and data
    sources, for a large load) and of dependency cycles, added to the run's."""
    resources, files, diagnostics = state.resources, state.files, state.diagnostics

    def locate(resource: Referrer, path: tuple[str | int, ...]) -> Location:
        return files.locate(resource.location.file, resource.document_index, path, False)

    declared = Declared(frozenset(state.declared))
    files.fit_to_budget()  # the child checking sources cannot see the budget fill up
    _, sources_found = both(
        lambda: resolve_references(resources, declared, config, locate, diagnostics),
        lambda: (
            check_code_sources(resources, config, root, locate)
            + check_data_sources(resources, config, root, locate)
        ),
        len(resources),
    )
    diagnostics.extend(sources_found)
    check_failed_references(state.failed, resources, declared, locate, diagnostics)
    for cycle in find_cycles(resources):
        diagnostics.append(cycle_diagnostic(cycle, resources, locate))


SPLIT_BYTES = 1 << 20
"""Spec files of at least this many bytes in all are parsed on two cores."""


def _parsed_files(
    files: Sequence[Path], displays: Sequence[str], scan: EventBudget
) -> Iterator[ParsedFile]:
    """Every file parsed, in order. A large set has its second half parsed by a forked
    child (specs.split_work) while the caller loads the first. The child's files are kept
    only if it never needed the shared scan budget (a tag or number walk): then parsing
    them here, after the first half, would have given the same result. The child re-reads
    no file for a position (it cannot know whether the run will have room to show it): a
    file it left `rough` is parsed again here while the run still has re-reads left."""
    half = len(files) // 2
    size = _total_size(files) if half else 0
    if not can_split(size, SPLIT_BYTES):
        for path, display in zip(files, displays, strict=True):
            yield parse_file(path, display, scan)
        return

    rest = list(zip(files[half:], displays[half:], strict=True))

    def second_half() -> tuple[list[ParsedFile], bool]:
        own = EventBudget(scan.events, rereads=0)
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
    for item, (path, display) in zip(parsed, rest, strict=True):
        if item.rough and (scan.rereads is None or scan.rereads > 0):
            item = parse_file(path, display, scan)
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
    files: LoadedFiles,
    diagnostics: DiagnosticBudget,
    uncounted: dict[str, int] | None = None,
) -> RootConfig | None:
    path = root / CONFIG_FILE
    if not path.exists() and not path.is_symlink():
        diagnostics.append(missing_config(root_display))
        return None
    display = display_path(root_display, path, root)
    refused = refused_file(path, root, display)
    if refused is not None:
        diagnostics.append(refused)
        return None
    parsed = parse_file(path, display, files.scan)
    files.add(parsed)
    diagnostics.extend(parsed.diagnostics)
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
        return files.written(display, 0, path)

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
            diagnostics.extend(number_warnings(document, [root], written))
    try:
        config = RootConfig.model_validate(document)
    except ValidationError as exc:
        errors, hidden = first_errors(
            exc, RootConfig.model_validate, document, MAX_DIAGNOSTICS_PER_FILE
        )
        diagnostics.extend(
            diagnostics_from_errors(
                errors,
                RootConfig,
                lambda p, key: files.locate(display, 0, p, key),
                strip_tag=False,
                written=written,
            )
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
    diagnostics: list[Diagnostic] | DiagnosticBudget,
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
        diagnostics.extend(parsed.diagnostics)
        for document in parsed.documents:
            if too_deep(document):
                raise SpecUsageError(f"cannot read --var-file {var_file}: nested too deeply")
            if not isinstance(document, dict):
                raise SpecUsageError(f"cannot read --var-file {var_file}: expected a mapping")
            context.update(document)
    context.update(variables if isinstance(variables, Mapping) else _parse_variables(variables))
    context.setdefault("environment", env_name)
    return env_name, context
