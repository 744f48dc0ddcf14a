"""`trainform fmt`: spec YAML in one layout, with comments, key order and quoting kept.

`format_folder` reads trainform.yaml and every spec file of a folder (the files `validate`
reads: hidden entries and `.trainformignore` matches skipped), re-emits each through
ruamel.yaml's round-trip mode (mappings indented by 2, sequence items by 4 with the dash
at 2, no line folding) and returns what changed. A file is rewritten only when the
formatted text loads to exactly the same data as the original (checked with a plain safe
load of both), so formatting can never change what a spec means; a file that does not
parse is reported with its line and column and nothing at all is written.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from trainform.specs.discovery import CONFIG_FILE, display_path, find_spec_files, missing_config
from trainform.specs.errors import Diagnostic, Location, Severity
from trainform.specs.file_writes import write_file
from trainform.specs.yamlio import parse_file


@dataclass
class FormatResult:
    """What `format_folder` found: the files it would rewrite and the problems."""

    changed: dict[str, tuple[Path, str]] = field(default_factory=dict)
    """display path -> (path, formatted text), for files whose text changes."""
    checked: int = 0
    problems: list[Diagnostic] = field(default_factory=list)


def _round_trip() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    return yaml


def _data(text: str) -> list[Any]:
    return list(YAML(typ="safe", pure=True).load_all(text))


def format_text(text: str) -> str:
    """`text` (one or more YAML documents) in the canonical layout; raises YAMLError."""
    yaml = _round_trip()
    documents = list(yaml.load_all(text))
    if not documents:
        return text
    out = io.StringIO()
    yaml.dump_all(documents, out)
    return out.getvalue()


def _problem(display: str, summary: str, line: int = 1, column: int = 1) -> Diagnostic:
    return Diagnostic(Severity.ERROR, "cannot-format", summary, Location(display, line, column))


def format_file(path: Path, display: str) -> tuple[str | None, list[Diagnostic]]:
    """The formatted text of one file (None when it is already formatted), or problems.

    The file is first parsed as `validate` parses it (size, alias and nesting bounds,
    duplicate keys): ruamel never sees a file the loader would refuse."""
    refused = [d for d in parse_file(path, display).diagnostics if d.severity is Severity.ERROR]
    if refused:
        return None, refused
    text, problem = _formatted(path, display)
    return text, [] if problem is None else [problem]


def _formatted(path: Path, display: str) -> tuple[str | None, Diagnostic | None]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, _problem(display, f"cannot read {display}: {exc.strerror}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, _problem(display, f"{display} is not UTF-8 text")
    try:
        formatted = format_text(text)
        same = _data(formatted) == _data(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        return None, _problem(display, f"cannot parse {display}: {exc.problem}", line, column)
    except YAMLError as exc:
        return None, _problem(display, f"cannot parse {display}: {exc}")
    if not same:
        return None, _problem(
            display, f"{display}: formatting would change what it means; left as it is"
        )
    return (None if formatted == text else formatted), None


def format_folder(folder: str) -> FormatResult:
    """Format (in memory) trainform.yaml and the spec files of `folder`."""
    root = Path(folder)
    root_display = os.path.normpath(folder)
    result = FormatResult()
    config = root / CONFIG_FILE
    if not config.exists() and not config.is_symlink():
        result.problems.append(missing_config(root_display))
        return result
    files, refused = find_spec_files(root, root_display)
    result.problems += refused
    if config.is_file() and not config.is_symlink():
        files.insert(0, config)
    for path in files:
        display = display_path(root_display, path, root)
        formatted, problems = format_file(path, display)
        result.checked += 1
        result.problems += problems
        if formatted is not None and not problems:
            result.changed[display] = (path, formatted)
    return result


def write_formatted(result: FormatResult) -> None:
    """Replace each changed file atomically, keeping its permissions (specs.file_writes:
    a file that cannot be written raises FileWriteError and is left as it was)."""
    for path, text in result.changed.values():
        write_file(path, text, sync=False)
