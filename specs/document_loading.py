"""One spec document of a load: rendered, validated, and kept as a resource.

specs.loader calls `load_document` for each document of each file, in order, with the
`LoadState` the documents of the load share. The steps, one after the other: a document
must be a mapping; its templates are rendered (specs.template_rendering); the part to
validate is chosen (all of it, unless it is too large or its file has no room left for
diagnostics); the job parameters YAML read as other numbers than written are warned
about; the document is validated; and a valid one is kept, unless its scope is wrong,
its file was salvaged or its address is taken. Nothing is raised: every problem is a
diagnostic, and a failed document still declares its name (so references to it are not
reported as unknown). specs.loader also validates trainform.yaml with `first_errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from trainform.specs.diagnostic_budget import DiagnosticBudget
from trainform.specs.errors import Diagnostic, Location, Severity
from trainform.specs.loaded_files import LoadedFiles
from trainform.specs.models.base import DocumentBase, Scope
from trainform.specs.models.kinds import DOCUMENT_ADAPTER, KINDS
from trainform.specs.partial_references import FailedDocument, partial_references
from trainform.specs.resource import Resource
from trainform.specs.suggest import closest_name
from trainform.specs.template_rendering import render_document
from trainform.specs.templating import NestingTooDeep, RenderBudget, TemplateProblem, has_template
from trainform.specs.validation import (
    Written,
    diagnostics_from_errors,
    format_path,
    number_warnings,
    possible_echoes,
    typo_echoes_last,
)
from trainform.specs.yamlio import (
    MAX_DOCUMENT_VALUES,
    count_values,
    nesting_error,
    numbers_read_as_written,
    prune,
    too_deep,
)

LARGE_DOCUMENT_CHARS = 64 * 1024
"""Documents longer than this have their values counted before validation."""
MAX_BUILT_ERRORS = 1_000
"""A document with more validation errors has only its first ones turned into diagnostics."""

Locate = Callable[..., Location]
"""(path, key=False) -> where the value at `path` (its key, with key=True) is written."""


@dataclass(slots=True)
class LoadState:
    """What the documents of one load share (the template variables, the render budget,
    the parsed files) and what they add to (resources, declared names, and the run's
    diagnostics: at most its budget's, the rest only counted)."""

    context: dict[str, Any]
    files: LoadedFiles
    diagnostics: DiagnosticBudget
    resources: dict[str, Resource] = field(default_factory=dict)
    declared: set[tuple[str, str | None, str]] = field(default_factory=set)
    budget: RenderBudget = field(default_factory=RenderBudget)
    failed: list[FailedDocument] = field(default_factory=list)
    """Documents that failed validation, with the references they make (checked too)."""


def load_document(
    state: LoadState,
    document: Any,
    display: str,
    index: int,
    start: int,
    templated: bool,
    *,
    keep: bool,
    room: int,
    failing: bool,
    span: tuple[int, int],
) -> int:
    """Validate one document and keep it as a resource (unless `keep` is False: it comes
    from a file with a duplicate key or a refused tag). At most `room` diagnostics are
    built; returns how many problems were only counted. `failing`: its file already has
    an error, so past `room` only the document's beginning is checked."""
    files = state.files

    def locate(path: Sequence[str | int], key: bool = False) -> Location:
        return files.locate(display, index, path, key)

    def written(path: Sequence[str | int]) -> tuple[str | None, Location] | None:
        return files.written(display, index, path)

    if not isinstance(document, dict):
        state.diagnostics.append(_not_a_mapping(document, display, start))
        return 0
    if templated:
        document = _apply_templates(state, document, display, start, locate)
        if document is None:
            return 0
    checked = _choose_validated_part(state, document, display, start, span, room, failing)
    if not templated and room > 0:
        _warn_of_changed_numbers(state, document, display, span, written)
    try:
        model = DOCUMENT_ADAPTER.validate_python(checked)
    except ValidationError as exc:
        return _report_invalid(
            state, exc, document, checked, (display, index, start), room, locate, written
        )
    if checked is not document:
        _declare(document, state.declared)
        return 0
    resource = Resource(model.address, model, Location(display, start, 1), index, [], templated)
    scope_problem = _check_scope(resource, locate)
    if scope_problem is not None or not keep:
        _declare(document, state.declared)
        if scope_problem is not None:
            state.diagnostics.append(scope_problem)
        return 0
    _keep_resource(state, resource, locate)
    return 0


def _not_a_mapping(document: Any, display: str, start: int) -> Diagnostic:
    return Diagnostic(
        Severity.ERROR,
        "not-a-mapping",
        "a spec document must be a mapping",
        Location(display, start, 1),
        expected="apiVersion, kind, metadata and spec",
        found="a list" if isinstance(document, list) else repr(document)[:60],
    )


def _apply_templates(
    state: LoadState, document: dict[str, Any], display: str, start: int, locate: Locate
) -> dict[str, Any] | None:
    """The document with its templates rendered, or None when rendering failed (each
    problem a diagnostic; the rendered name still counts as declared)."""
    try:
        rendered, problems = render_document(document, state.context, state.budget)
    except NestingTooDeep:
        state.diagnostics.append(nesting_error(display, start))
        return None
    if problems:
        _declare(rendered, state.declared)
        for problem in problems:
            state.diagnostics.append(_template_diagnostic(problem, state.context, locate))
        return None
    return rendered


def _choose_validated_part(
    state: LoadState,
    document: dict[str, Any],
    display: str,
    start: int,
    span: tuple[int, int],
    room: int,
    failing: bool,
) -> Any:
    """What of `document` to validate: all of it, or only its first values when it holds
    too many to be a spec document (an error) or its file already failed with no room
    left for more diagnostics. A part is validated for its errors, never kept."""
    if span[1] - span[0] > LARGE_DOCUMENT_CHARS:
        values = count_values(document, MAX_DOCUMENT_VALUES)
        if values > MAX_DOCUMENT_VALUES:
            state.diagnostics.append(_too_large(display, start))
            return prune(document, MAX_BUILT_ERRORS)
    if room <= 0 and failing:
        return prune(document, MAX_BUILT_ERRORS)
    return document


def _warn_of_changed_numbers(
    state: LoadState,
    document: dict[str, Any],
    display: str,
    span: tuple[int, int],
    written: Written,
) -> None:
    """`yaml-number` warnings for job parameters YAML reads as other numbers than written
    (`1.10`), looked at closely only when a quick look at the text missed one."""
    spec = document.get("spec")
    parameters = spec.get("parameters") if type(spec) is dict else None
    if type(parameters) is not dict or not parameters:
        return
    text = state.files.files[display].text
    anchor = text.find("parameters:", span[0], span[1])
    if not numbers_read_as_written(text, max(anchor, span[0]), span[1], parameters):
        state.diagnostics.extend(number_warnings(document, [("spec", "parameters")], written))


def _report_invalid(
    state: LoadState,
    exc: ValidationError,
    document: dict[str, Any],
    checked: Any,
    where: tuple[str, int, int],
    room: int,
    locate: Locate,
    written: Written,
) -> int:
    """Diagnostics for a document that failed validation (at most `room`, or one if it
    nests too deeply); returns how many problems were only counted. `where`: its file,
    index in the file and first line."""
    display, _, start = where
    _declare(document, state.declared)
    if too_deep(document):
        state.diagnostics.append(nesting_error(display, start))
        return 0
    kind, project, name = _identity(document)
    model = KINDS.get(kind) if isinstance(kind, str) else None
    address = f"{kind}/{project}/{name}" if project else f"{kind}/{name}"
    errors, hidden = first_errors(exc, DOCUMENT_ADAPTER.validate_python, checked, room)
    state.diagnostics.extend(
        diagnostics_from_errors(errors, model, locate, address if model else "", written=written)
    )
    if model is not None and checked is document and isinstance(name, str) and name:
        _remember_failed(state, exc, document, model, (address, project), where)
    return hidden


def _remember_failed(
    state: LoadState,
    exc: ValidationError,
    document: dict[str, Any],
    model: type[DocumentBase],
    identity: tuple[str, str | None],
    where: tuple[str, int, int],
) -> None:
    """Keep what reference checking needs of a failed document (not of one with so many
    errors that only its beginning was validated)."""
    if exc.error_count() > MAX_BUILT_ERRORS:
        return
    kind = document.get("kind")
    paths = [
        tuple(e["loc"][1:] if e["loc"][:1] == (kind,) else e["loc"])
        for e in exc.errors(include_url=False)
    ]
    references = partial_references(document, model, paths)
    if references:
        (address, project), (display, index, start) = identity, where
        state.failed.append(
            FailedDocument(address, project, Location(display, start, 1), index, references)
        )


def _keep_resource(state: LoadState, resource: Resource, locate: Locate) -> None:
    """Keep `resource`, unless a resource of its address is kept already: then it is a
    `duplicate-name` error, pointing at the first declaration too."""
    existing = state.resources.get(resource.address)
    if existing is None:
        state.resources[resource.address] = resource
        return
    first_at = state.files.locate(
        existing.location.file, existing.document_index, ("metadata", "name"), False
    )
    state.diagnostics.append(
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


def first_errors(
    exc: ValidationError, validate: Callable[[Any], Any], document: Any, room: int
) -> tuple[list[Any], int]:
    """The errors to turn into diagnostics (at most `room`) and how many problems are left
    over (at least: a `missing` field a typo beside it explains is one problem, not two).

    pydantic builds a dict per error; for a document with a huge number of them (a list
    of a million wrong values) only its first values are validated again for the ones
    shown (a `missing` field may be an artefact of that cut, so those are not shown), and
    the rest are only counted. When not all errors fit, the `missing` fields a typo may
    explain go last, so the typo is what is shown.
    """
    count = exc.error_count()
    if count > MAX_BUILT_ERRORS:
        if room <= 0:
            return [], count
        try:
            validate(prune(document, MAX_BUILT_ERRORS))
            errors = []
        except ValidationError as again:
            errors = [e for e in again.errors(include_url=False) if e["type"] != "missing"]
        shown = errors[:room]
        return shown, count - len(shown)
    errors = exc.errors(include_url=False)
    if len(errors) > room:
        errors = typo_echoes_last(errors)
    shown, rest = errors[: max(room, 0)], errors[max(room, 0) :]
    return shown, len(rest) - possible_echoes(rest, errors)


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


def _check_scope(resource: Resource, locate: Locate) -> Diagnostic | None:
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


def _template_diagnostic(
    problem: TemplateProblem, context: dict[str, Any], locate: Locate
) -> Diagnostic:
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
