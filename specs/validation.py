"""Turning pydantic validation errors into diagnostics a platform engineer can act on, and
the `yaml-number` warnings: a plain scalar such as `1.10` or `0777` that YAML reads as a
number other than what was written, in a field that takes text or free-form values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails
from trainform.specs.errors import Diagnostic, Location, Severity
from trainform.specs.introspect import field_names_at
from trainform.specs.models.training import DATASET_REF, DATASET_REF_HELP
from trainform.specs.names import PATTERN_HELP
from trainform.specs.suggest import closest_name

Locator = Callable[[Sequence[str | int], bool], Location]
Written = Callable[[Sequence[str | int]], tuple[str | None, Location] | None]
"""Path -> (the text of the value if it is a plain scalar, its location), or None."""

_PATTERN_HELP = {**PATTERN_HELP, DATASET_REF: DATASET_REF_HELP}


def format_path(path: Sequence[str | int]) -> str:
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += f".{step}" if text else str(step)
    return text


def describe_found(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def diagnostics_from_errors(
    errors: list[ErrorDetails],
    model: type[BaseModel] | None,
    locate: Locator,
    address: str = "",
    strip_tag: bool = True,
    written: Written | None = None,
) -> list[Diagnostic]:
    """One diagnostic per pydantic error, located and with a suggestion where one helps.

    With `written`, a number given to a text field that YAML read differently from how it
    was written (`version: 1.10`) also gets a `yaml-number` warning saying to quote it."""
    result = []
    warnings = []
    for error in errors:
        loc = list(error["loc"])
        if (
            strip_tag
            and loc
            and model is not None
            and isinstance(loc[0], str)
            and loc[0] == model.__name__
        ):
            loc = loc[1:]
        key_error = bool(loc) and loc[-1] == "[key]"
        if key_error:
            loc = loc[:-1]
        result.append(_one(error, loc, model, locate, address, key_error))
        value = error.get("input")
        if (
            written is not None
            and error["type"] == "string_type"
            and isinstance(value, int | float)
            and not isinstance(value, bool)
        ):
            warning = number_warning(loc, written)
            if warning is not None:
                warnings.append(warning)
    return _without_typo_echoes(result) + warnings


def _parents(errors: Sequence[ErrorDetails], kind: str) -> dict[tuple[Any, ...], int]:
    """How many errors of `kind` each mapping (the path above the field) holds."""
    found: dict[tuple[Any, ...], int] = {}
    for error in errors:
        if error["type"] == kind:
            parent = tuple(error["loc"][:-1])
            found[parent] = found.get(parent, 0) + 1
    return found


def typo_echoes_last(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """`errors` with the `missing` ones beside an unknown field (which may be its typo, so
    not shown: `_without_typo_echoes`) moved to the end, the order otherwise kept."""
    unknown = _parents(errors, "extra_forbidden")
    if not unknown:
        return errors
    return sorted(errors, key=lambda e: e["type"] == "missing" and tuple(e["loc"][:-1]) in unknown)


def possible_echoes(rest: Sequence[ErrorDetails], errors: Sequence[ErrorDetails]) -> int:
    """At most how many `missing` errors of `rest` a typo among `errors` explains (each
    unknown field suggests one name): per mapping, the fewer of the two."""
    missing = _parents(rest, "missing")
    if not missing:
        return 0
    unknown = _parents(errors, "extra_forbidden")
    return sum(min(count, unknown.get(parent, 0)) for parent, count in missing.items())


def _without_typo_echoes(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Drop "missing field X" when an unknown field beside it suggests X: one typo, one error."""
    suggested = {
        (d.field.rpartition(".")[0], d.suggestion)
        for d in diagnostics
        if d.code == "unknown-field" and d.suggestion
    }
    return [
        d
        for d in diagnostics
        if not (d.code == "missing-field" and tuple(d.field.rpartition(".")[::2]) in suggested)
    ]


def _one(
    error: ErrorDetails,
    path: list[Any],
    model: type[BaseModel] | None,
    locate: Locator,
    address: str,
    key_error: bool,
) -> Diagnostic:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    field = format_path(path)
    last = str(path[-1]) if path else ""
    found = describe_found(error.get("input"))

    def make(code: str, summary: str, where: Location, **extra: str) -> Diagnostic:
        return Diagnostic(
            Severity.ERROR, code, summary, where, field=field, address=address, **extra
        )

    if kind == "extra_forbidden":
        names = field_names_at(model, path[:-1]) if model is not None else []
        return make(
            "unknown-field",
            f"unknown field `{last}`",
            locate(path, True),
            expected="one of " + ", ".join(f"`{n}`" for n in sorted(names)) if names else "",
            found=last,
            suggestion=closest_name(last, names),
        )
    if kind == "missing":
        return make(
            "missing-field",
            f"missing required field `{last}`",
            locate(path[:-1], False),
            expected=f"a value for `{last}`",
            found="nothing",
        )
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        from trainform.specs.models.kinds import KINDS

        tag = str(ctx.get("tag", ""))
        return Diagnostic(
            Severity.ERROR,
            "unknown-kind",
            f"unknown kind `{tag}`" if tag else "missing field `kind`",
            locate(["kind"], False),
            field="kind",
            expected="one of " + ", ".join(f"`{k}`" for k in KINDS),
            found=tag or "nothing",
            suggestion=closest_name(tag, KINDS) if tag else "",
            address=address,
        )
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        expected = _PATTERN_HELP.get(pattern, f"a string matching {pattern}")
    elif kind == "literal_error":
        expected = f"one of {ctx.get('expected', '')}"
    elif kind == "value_error":
        expected = str(ctx.get("error", error["msg"])).removeprefix("Value error, ")
        summary = f"invalid value for `{last or 'document'}`: {expected}"
        return make("invalid-value", summary, locate(path, key_error), found=found)
    else:
        expected = error["msg"][0].lower() + error["msg"][1:] if error["msg"] else ""
        expected = expected.removeprefix("input should be ").removeprefix("expected ")
    what = "key" if key_error else "value"
    summary = f"invalid {what} for `{last or 'document'}`: expected {expected}"
    return make("invalid-value", summary, locate(path, key_error), expected=expected, found=found)


def number_warning(path: Sequence[str | int], written: Written) -> Diagnostic | None:
    """A `yaml-number` warning for the value at `path`, if it is a plain scalar that YAML
    reads as a number other than what was written."""
    from trainform.specs.yamlio import number_changes_meaning

    found = written(path)
    if found is None or found[0] is None:
        return None
    text, where = found
    value = number_changes_meaning(text)
    if value is None:
        return None
    return Diagnostic(
        Severity.WARNING,
        "yaml-number",
        f"`{text}` is read as the number {value!r}: quote it if you mean the text",
        where,
        field=format_path(path),
        expected=f'"{text}" in quotes for the text, or {value!r} for the number',
        found=text,
    )


def number_warnings(
    document: Any, roots: Sequence[Sequence[str | int]], written: Written
) -> list[Diagnostic]:
    """`yaml-number` warnings for the numbers directly under the free-form mappings at
    `roots` (job parameters, template variables), lists of scalars included. Each number
    is looked up as written (a walk of the YAML): callers first rule out the documents
    whose numbers are visibly written as read (specs.yamlio.numbers_read_as_written)."""
    suspects: list[tuple[str | int, ...]] = []
    for root in roots:
        mapping = document
        for step in root:
            mapping = mapping.get(step) if isinstance(mapping, dict) else None
        if not isinstance(mapping, dict):
            continue
        for key, value in mapping.items():
            kind = type(value)
            if kind is int or kind is float:
                suspects.append((*root, key))
            elif kind is list:
                suspects += [
                    (*root, key, index)
                    for index, item in enumerate(value)
                    if type(item) is int or type(item) is float
                ]
    warnings = []
    for path in suspects:
        warning = number_warning(path, written)
        if warning is not None:
            warnings.append(warning)
    return warnings
