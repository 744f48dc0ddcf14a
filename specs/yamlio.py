"""Reading YAML files safely and fast: limits, YAML 1.2 scalars, multi-document splitting.

The hot path parses with yaml-rs (a Rust YAML 1.2 parser: safe by construction, no tags that
build objects, duplicate keys rejected, alias expansion bounded). Positions are not kept on
this path; `specs.positions` re-reads only the files that have diagnostics, with ruamel's
round-trip loader, to point at line and column.

yaml-rs ignores most tags it does not know (`!!python/object/new:x [..]` loads as a plain
list), so tags are checked (specs.yaml_tags): only when the text holds a `!` where a tag
could start is the document walked with ruamel to find real tags (not `!` in quotes,
comments or block text), each one outside the standard set an error `yaml-tag` at its
line and column. A file with a duplicate key or a refused tag still has its documents
validated (last value wins), but they are never loaded (`ParsedFile.salvaged`).
Documents are split where specs.document_starts finds them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml_rs
from trainform.specs.document_starts import document_starts
from trainform.specs.errors import Diagnostic, Location, Severity
from trainform.specs.yaml_tags import invalid_tag_errors, tag_errors

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32
MAX_ALIAS_EVENTS = 100_000

_ALIAS_LIMITS = yaml_rs.AliasLimits(
    max_total_replayed_events=MAX_ALIAS_EVENTS, max_replay_stack_depth=MAX_DEPTH
)
_TEMPLATE_MARKER = re.compile(r"\{[{%#]")
_POSITION = re.compile(r"line (\d+), column (\d+)")
_LARGE_TEXT = 16 * 1024
"""Texts larger than this are never composed by ruamel (too slow); see positions."""
MAX_DOCUMENT_VALUES = 50_000
"""Values (scalars and containers) a document may hold; larger ones are not validated whole."""


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
    """True when the documents were recovered from a file with an error (a duplicate key,
    last value wins, or a refused tag): validated for their own errors, never loaded."""
    scan: Any = None
    """The load's specs.event_budget.EventBudget for walks of this file (None: its own)."""
    rough: bool = False
    """True when a diagnostic's position was not worked out (no re-read was left)."""


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


def _may_reread(parsed: ParsedFile) -> bool:
    """Whether the text of `parsed` may be re-read by ruamel for a position: always
    outside a load, else while its scan budget has `rereads` left (each asks one)."""
    scan = parsed.scan
    if scan is None or scan.rereads is None:
        return True
    if scan.rereads <= 0:
        parsed.rough = True
        return False
    scan.rereads -= 1
    return True


def _duplicate_position(text: str, key: str, reread: bool = True) -> tuple[int, int, str]:
    """(line, column, ruamel's wording) of the first repeated key, bounded in time; with
    `reread` False, only a look at the text."""
    from trainform.specs.positions import first_duplicate_key, ruamel_error_position

    if reread and len(text) <= _LARGE_TEXT:
        return ruamel_error_position(text)
    found = first_duplicate_key(text) if reread else None
    if found is not None:
        return found[0], found[1], ""
    # Too far into a huge file to walk: the second line that starts with the key.
    plain = re.escape(key.strip("'\""))
    lines = [
        m.start()
        for m in re.finditer(rf"^[ \t]*(?:- )?['\"]?{plain}['\"]?[ \t]*:", text, re.MULTILINE)
    ]
    if len(lines) > 1:
        return text.count("\n", 0, lines[1]) + 1, 1, ""
    return 1, 1, ""


def _bad_tagged_value(parsed: ParsedFile, message: str) -> list[Diagnostic]:
    """A standard tag on a value it cannot convert (`!!int x`): where it is written."""
    match = re.search(r"Invalid value '([^'\n]*)' for '(![^'\n]*)' tag", message)
    if match is None:
        return []
    found = re.search(rf"{re.escape(match[2])}[ \t]+['\"]?{re.escape(match[1])}", parsed.text)
    offset = found.start() if found else 0
    line = parsed.text.count("\n", 0, offset) + 1
    column = offset - (parsed.text.rfind("\n", 0, offset) + 1) + 1
    return [
        _error(
            parsed.display,
            "yaml-syntax",
            f"invalid YAML: `{match[1]}` is not a valid `{match[2]}`",
            line,
            column,
            expected=f"a value {match[2]} can read, or no tag",
            found=match[1],
        )
    ]


def count_values(value: Any, limit: int) -> int:
    """Scalars, keys and containers in `value`, counted up to just past `limit`."""
    count = 0
    pending = [value]
    while pending:
        item = pending.pop()
        count += 1
        kind = type(item)
        if kind is dict:
            count += len(item)
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        if count > limit:
            break
    return count


def prune(value: Any, keep: int) -> Any:
    """A copy of `value` with at most about `keep` values, the first ones in document
    order: what to validate of a document too large to validate whole (the errors of its
    beginning keep their paths)."""
    left = [keep]

    def copy(item: Any, depth: int) -> Any:
        left[0] -= 1
        kind = type(item)
        if kind is dict:
            result: dict[Any, Any] = {}
            for key, child in item.items():
                if left[0] <= 0 or depth > MAX_DEPTH:
                    break
                result[key] = copy(child, depth + 1)
            return result
        if kind is list:
            items: list[Any] = []
            for child in item:
                if left[0] <= 0 or depth > MAX_DEPTH:
                    break
                items.append(copy(child, depth + 1))
            return items
        return item

    return copy(value, 0)


_NUMBER_TOKEN = re.compile(r"[-+]?[0-9.][0-9a-fA-FxXoObB_.eE+-]*")


def number_changes_meaning(token: str) -> int | float | None:
    """The number YAML reads the plain scalar `token` as, when that number is unlikely to
    be what was written: `1.10` -> 1.1, `0777` -> 777, `0x1F` -> 31, `1e3` -> 1000.0,
    `1_000` -> 1000. None when `token` is no number or reads as written (`1.5`, `1e-4`)."""
    if not _NUMBER_TOKEN.fullmatch(token):
        return None
    try:
        value = yaml_rs.loads(token)
    except (yaml_rs.YAMLDecodeError, ValueError, TypeError):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return value if str(value) != token else None
    if math.isinf(value) or math.isnan(value):
        return None
    digits = token.lstrip("+-")
    if "e" in digits.lower():
        return value if value.is_integer() else None
    whole, _, fraction = digits.partition(".")
    if len(fraction) > 1 and fraction.endswith("0"):
        return value
    if len(whole) > 1 and whole.startswith("0"):
        return value
    return None


_VALUE_ENDS = frozenset(" \t\r\n,}]#")
_KEY_STARTS = frozenset(" \t\n{,")


def numbers_read_as_written(text: str, begin: int, end: int, mapping: dict[Any, Any]) -> bool:
    """True when every number directly in `mapping` is visibly written in text[begin:end]
    as `key: value` the way Python prints it, so YAML read it as written. A quick look
    without parsing: False only means "not seen", and the caller looks closer."""
    find = text.find
    for key, value in mapping.items():
        kind = type(value)
        if kind is int or kind is float:
            needle = f"{key}: {value!r}"
            at = find(needle, begin, end)
            after = at + len(needle)
            if at < 0 or (after < len(text) and text[after] not in _VALUE_ENDS):
                return False
            if at > 0 and text[at - 1] not in _KEY_STARTS:
                return False
        elif kind is list and any(type(item) is int or type(item) is float for item in value):
            return False
    return True


def _decode_error(parsed: ParsedFile, message: str) -> Diagnostic:
    """A diagnostic for a parse failure; positions come from ruamel when yaml-rs has none."""
    from trainform.specs.positions import ruamel_error_position

    first_line = message.splitlines()[-1] if message else "cannot parse"
    if "duplicate mapping key" in message:
        key = message.split(":", 1)[1].strip()
        line, column, key_problem = _duplicate_position(parsed.text, key, _may_reread(parsed))
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
    if len(parsed.text) > _LARGE_TEXT or not _may_reread(parsed):
        return _error(parsed.display, "yaml-syntax", f"invalid YAML: {first_line}")
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


def parse_file(path: Path, display: str, scan: Any = None) -> ParsedFile:
    """Parse one YAML file into documents; problems become diagnostics, never exceptions.

    `scan` (a specs.event_budget.EventBudget) bounds the walks of the tag check across files.
    """
    parsed = ParsedFile(path, display, scan=scan)
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
    text = parsed.text
    try:
        result = _loads(text, yaml_rs.DuplicateKeyPolicy.Error)
    except yaml_rs.YAMLDecodeError as exc:
        message = str(exc)
        if "Invalid tag" in message:
            parsed.diagnostics += invalid_tag_errors(parsed, message)
            return
        if "tag" in message and "!" in text:
            tags = tag_errors(parsed) or _bad_tagged_value(parsed, message)
            if tags:
                parsed.diagnostics += tags
                return
        parsed.diagnostics.append(_decode_error(parsed, message))
        if "duplicate mapping key" not in message:
            return
        try:
            result = _loads(text, yaml_rs.DuplicateKeyPolicy.LastWins)
        except yaml_rs.YAMLDecodeError as again:
            if "Invalid tag" in str(again):
                parsed.diagnostics += invalid_tag_errors(parsed, str(again))
            return
        except (RecursionError, OverflowError, ValueError, TypeError):
            return
        parsed.salvaged = True
    except TypeError:
        tags = tag_errors(parsed) if "!" in text else []
        if tags:  # `!!set` and friends build values yaml-rs cannot use as keys
            parsed.diagnostics += tags
            return
        from trainform.specs.positions import ruamel_error_position

        small = len(text) <= _LARGE_TEXT
        line, column, _ = (
            ruamel_error_position(text) if small and _may_reread(parsed) else (1, 1, "")
        )
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
        tags = tag_errors(parsed) if "!" in text else []
        parsed.diagnostics += tags or [
            _error(parsed.display, "yaml-syntax", f"invalid YAML: {exc}")
        ]
        return
    if "!" in text:
        tags = tag_errors(parsed)
        if tags:
            parsed.diagnostics += tags
            parsed.salvaged = True
    found = document_starts(text)
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
