"""Reading YAML files safely and fast: limits, YAML 1.2 scalars, multi-document splitting.

The hot path parses with yaml-rs (a Rust YAML 1.2 parser: safe by construction, no tags that
build objects, duplicate keys rejected, alias expansion bounded). Positions are not kept on
this path; `specs.positions` re-reads only the files that have diagnostics, with ruamel's
round-trip loader, to point at line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml_rs

from specs.errors import Diagnostic, Location, Severity

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32
MAX_ALIAS_EVENTS = 100_000

_ALIAS_LIMITS = yaml_rs.AliasLimits(
    max_total_replayed_events=MAX_ALIAS_EVENTS, max_replay_stack_depth=MAX_DEPTH
)
_MARKER_LINE = re.compile(r"^(---|\.\.\.)(?=[ \t]|$)(.*)$", re.MULTILINE)
_CONTENT_LINE = re.compile(r"^(?![ \t]*(?:#|$))", re.MULTILINE)
_TEMPLATE_MARKER = re.compile(r"\{[{%#]")
_POSITION = re.compile(r"line (\d+), column (\d+)")


@dataclass
class ParsedFile:
    """The documents of one file, each with the line it starts on, or the reason it failed."""

    path: Path
    display: str
    text: str = ""
    documents: list[Any] = field(default_factory=list)
    start_lines: list[int] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    templated: list[bool] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    salvaged: bool = False
    """True when the documents were recovered from a file with an error (duplicate keys,
    last value wins): good enough to know which names the file declares, never loaded."""


def _error(
    display: str, code: str, summary: str, line: int = 1, column: int = 1, **extra: str
) -> Diagnostic:
    return Diagnostic(
        Severity.ERROR,
        code,
        summary,
        Location(display, line, column),
        **extra,  # type: ignore[arg-type]
    )


def _document_starts(text: str) -> list[tuple[int, int]]:
    """(1-based line, offset) of each document's first content, counting documents as YAML does.

    `---` opens a document (content may follow on the same line), `...` closes one, and
    content outside any document opens a bare one. A document with no content (it loads
    as null) is placed on its marker line, so the list stays aligned with what the parser
    returns. Regular-expression scans from marker to marker keep this linear in the text.
    """
    starts: list[tuple[int, int]] = []
    counted = [0, 1]  # a position and its line, advanced monotonically

    def at(position: int) -> tuple[int, int]:
        counted[1] += text.count("\n", counted[0], position)
        counted[0] = position
        return counted[1], position

    def first_content(begin: int, end: int) -> int | None:
        following = begin + 1  # the line after a marker, in the usual layout
        if following < end and text[begin] == "\n" and text[following] not in " \t\r\n#%":
            return following
        for match in _CONTENT_LINE.finditer(text, begin, end):
            if text.startswith("%", match.start()):
                continue  # a directive, before a document's `---`
            return match.start()
        return None

    markers = list(_MARKER_LINE.finditer(text))
    bounds = [m.start() for m in markers] + [len(text)]
    bare = first_content(0, bounds[0])
    if bare is not None:
        starts.append(at(bare))
    for index, marker in enumerate(markers):
        here = at(marker.start())
        after = first_content(marker.end(), bounds[index + 1])
        rest = marker[2].strip()
        if marker[1] == "---" and rest and not rest.startswith("#"):
            starts.append(here)
        elif marker[1] == "---":
            starts.append(here if after is None else at(after))
        elif after is not None:
            starts.append(at(after))
    return starts or [(1, 0)]


def too_deep(value: Any, budget: int = MAX_DEPTH) -> bool:
    """True if containers nest deeper than `budget`; recursion is bounded by the budget.

    The loader asks this of every document that is not validated by a schema of bounded
    depth: trainform.yaml, variable files, templated documents and documents that fail
    validation (a spec document that validates is as shallow as its kind's schema).
    """
    if not isinstance(value, dict | list):
        return False
    if budget == 0:
        return True
    children = value.values() if type(value) is dict else value
    for child in children:
        kind = type(child)
        if (kind is dict or kind is list) and too_deep(child, budget - 1):
            return True
    return False


def _decode_error(parsed: ParsedFile, message: str) -> Diagnostic:
    """A diagnostic for a parse failure; positions come from ruamel when yaml-rs has none."""
    from specs.positions import ruamel_error_position

    first_line = message.splitlines()[-1] if message else "cannot parse"
    if "duplicate mapping key" in message:
        line, column, key_problem = ruamel_error_position(parsed.text)
        return _error(
            parsed.display,
            "duplicate-key",
            f"duplicate key: {message.split(':', 1)[1].strip()}",
            line,
            column,
            expected="each key at most once per mapping",
            detail=key_problem,
        )
    if "alias replay limit" in message or "replay stack depth" in message:
        return _error(
            parsed.display,
            "alias-limit",
            "too many alias expansions (a billion-laughs document?)",
            expected=f"at most {MAX_ALIAS_EVENTS} expanded alias events",
            found=message,
        )
    match = _POSITION.search(message)
    if match:
        return _error(
            parsed.display,
            "yaml-syntax",
            f"invalid YAML: {first_line}",
            int(match[1]),
            int(match[2]),
        )
    line, column, problem = ruamel_error_position(parsed.text)
    return _error(
        parsed.display, "yaml-syntax", f"invalid YAML: {problem or first_line}", line, column
    )


def nesting_error(display: str, line: int) -> Diagnostic:
    return _error(
        display,
        "nesting-too-deep",
        "document is nested too deeply",
        line,
        1,
        expected=f"at most {MAX_DEPTH} levels",
    )


def parse_file(path: Path, display: str) -> ParsedFile:
    """Parse one YAML file into documents; problems become diagnostics, never exceptions."""
    parsed = ParsedFile(path, display)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            parsed.diagnostics.append(
                _error(
                    display,
                    "file-too-large",
                    "file is too large to be a spec file",
                    expected=f"at most {MAX_FILE_BYTES} bytes",
                    found=f"{size} bytes",
                )
            )
            return parsed
        raw = path.read_bytes()
    except OSError as exc:
        parsed.diagnostics.append(
            _error(display, "unreadable", f"cannot read file: {exc.strerror}")
        )
        return parsed
    try:
        parsed.text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        parsed.diagnostics.append(
            _error(
                display,
                "encoding",
                "file is not valid UTF-8",
                line,
                column,
                found=f"byte 0x{raw[exc.start]:02x}",
            )
        )
        return parsed
    parse_text(parsed)
    return parsed


def _loads(text: str, duplicates: yaml_rs.DuplicateKeyPolicy) -> Any:
    return yaml_rs.loads(
        text, parse_datetime=False, alias_limits=_ALIAS_LIMITS, duplicate_key_policy=duplicates
    )


def parse_text(parsed: ParsedFile) -> None:
    from specs.positions import ruamel_error_position

    text = parsed.text
    try:
        result = _loads(text, yaml_rs.DuplicateKeyPolicy.Error)
    except yaml_rs.YAMLDecodeError as exc:
        parsed.diagnostics.append(_decode_error(parsed, str(exc)))
        if "duplicate mapping key" not in str(exc):
            return
        try:
            result = _loads(text, yaml_rs.DuplicateKeyPolicy.LastWins)
        except (yaml_rs.YAMLDecodeError, RecursionError, OverflowError, ValueError, TypeError):
            return
        parsed.salvaged = True
    except TypeError:
        line, column, _ = ruamel_error_position(text)
        parsed.diagnostics.append(
            _error(
                parsed.display,
                "yaml-syntax",
                "invalid YAML: a mapping key must be a plain value, not a mapping or a list",
                line,
                column,
            )
        )
        return
    except (RecursionError, OverflowError, ValueError) as exc:
        parsed.diagnostics.append(_error(parsed.display, "yaml-syntax", f"invalid YAML: {exc}"))
        return
    found = _document_starts(text)
    documents = result if len(found) > 1 and isinstance(result, list) else [result]
    if len(found) != len(documents):
        found = (found + [found[-1]] * len(documents))[: len(documents)]
    offsets = [offset for _, offset in found] + [len(text)]
    markers = "{" in text and _TEMPLATE_MARKER.search(text) is not None
    starts = [line for line, _ in found]
    index = -1
    for position, (document, start) in enumerate(zip(documents, starts, strict=True)):
        if document is None:
            continue
        index += 1
        parsed.documents.append(document)
        parsed.start_lines.append(start)
        parsed.indices.append(index)
        parsed.spans.append((offsets[position], offsets[position + 1]))
        parsed.templated.append(
            markers
            and _TEMPLATE_MARKER.search(text, offsets[position], offsets[position + 1]) is not None
        )
