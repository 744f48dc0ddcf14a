"""The check of YAML tags: every tag outside the standard set is an error `yaml-tag`.

yaml-rs ignores most tags it does not know (`!!python/object/new:x [..]` loads as a plain
list) and names, without a position, the ones it refuses. specs.yamlio asks `tag_errors`
of a file whose text holds a `!` and `invalid_tag_errors` of one yaml-rs refused for a
tag: only a `!` where a tag could start makes a document worth walking with ruamel
(specs.positions, imported on first use), to tell real tags from a `!` in quotes,
comments or block text and to find each one's line and column.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Protocol

from trainform.specs.document_starts import document_starts
from trainform.specs.errors import Diagnostic, Location, Severity

# A `!` where a node (so a tag) may start: at a line's first content, after `- `, `? `,
# `: `, a flow `[ { ,` or an anchor. Over-approximate: quotes and comments are not seen.
_TAG_CANDIDATE = re.compile(r"(?:^|[-?:\[{,]|&[^\s,\[\]{}]+)[ \t]*!", re.MULTILINE)
_INVALID_TAG = re.compile(r"Invalid tag: '([^'\n]*)'")


class CheckedFile(Protocol):
    """What the check reads of a file (a specs.yamlio.ParsedFile): its text, the path
    diagnostics name, and the load's specs.event_budget.EventBudget (None: its own)."""

    text: str
    display: str
    scan: Any


def _short_tag(tag: str) -> str:
    shown = tag.replace("tag:yaml.org,2002:", "!!", 1)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _tag_error(display: str, tag: str, line: int, column: int) -> Diagnostic:
    return Diagnostic(
        Severity.ERROR,
        "yaml-tag",
        f"YAML tag `{_short_tag(tag)}` is not allowed in trainform files",
        Location(display, line, column),
        expected="plain YAML values (at most the standard tags !!str, !!int, !!float, "
        "!!bool, !!null, !!map, !!seq); quote the value if the `!` is part of it",
        found=_short_tag(tag),
    )


def tag_errors(parsed: CheckedFile) -> list[Diagnostic]:
    """Every tag outside the standard set, with its real position.

    Cheap first: only `!` where a tag could start makes a document worth walking, and the
    walk stops past its last such `!`. Where ruamel cannot tell (the event budget of the
    load ran out, or it cannot parse the document alone), the `!` is reported as a tag.
    """
    from trainform.specs.positions import STANDARD_TAGS, Walk

    text = parsed.text
    candidates = [
        m.end() - 1
        for m in _TAG_CANDIDATE.finditer(text)
        if not _quoted_or_comment(text, text.rfind("\n", 0, m.end() - 1) + 1, m.end() - 1)
    ]
    if not candidates:
        return []
    # Runs of consecutive documents holding candidates, each walked once: a walk costs
    # a parser set-up, and files of thousands of small documents are common.
    starts = document_starts(text)
    bounds = [offset for _, offset in starts] + [len(text)]
    runs: list[tuple[int, int, int, list[int]]] = []  # start line, begin, end, candidates
    position = 0
    for number, (start_line, begin) in enumerate(starts):
        end = bounds[number + 1]
        group = []
        while position < len(candidates) and candidates[position] < end:
            if candidates[position] >= begin:
                group.append(candidates[position])
            position += 1
        if not group:
            continue
        if runs and runs[-1][2] == begin:
            runs[-1] = (runs[-1][0], runs[-1][1], end, runs[-1][3] + group)
        else:
            runs.append((start_line, begin, end, group))
    found: list[Diagnostic] = []
    counted = [0, 1]  # an offset and its line, advanced monotonically (candidates ascend)
    for start_line, begin, end, group in runs:
        walk = Walk(text[begin:end], parsed.scan)
        walked = -1
        for node in walk:
            if node.offset > group[-1] - begin:
                break
            walked = node.offset
            if node.tag is not None and node.tag not in STANDARD_TAGS:
                found.append(
                    _tag_error(parsed.display, node.tag, start_line + node.line - 1, node.column)
                )
        else:
            if not walk.complete:
                for offset in (c for c in group if c - begin > walked):
                    counted[1] += text.count("\n", counted[0], offset)
                    counted[0] = offset
                    found.append(
                        _candidate_tag_error(parsed, offset, certain=False, line=counted[1])
                    )
    return found


def _quoted_or_comment(text: str, begin: int, end: int) -> bool:
    """True if text[end] sits inside a quoted scalar or a comment opened earlier on its
    line text[begin:end]; spares the walk for `"- !x"` and `# !x`. Quotes open only where
    a node starts (so the apostrophe of `it's` opens nothing); anything spanning lines is
    left to the walk."""
    quote = ""
    previous = ""  # last character outside quotes that is not a space
    index = begin
    while index < end:
        char = text[index]
        if quote == '"':
            if char == "\\":
                index += 1
            elif char == '"':
                quote, previous = "", '"'
        elif quote == "'":
            if char == "'":
                if index + 1 < end and text[index + 1] == "'":
                    index += 1
                else:
                    quote, previous = "", "'"
        elif char in "\"'" and previous in ("", ":", "-", "?", "[", "{", ","):
            quote = char
        elif char == "#" and (index == begin or text[index - 1] in " \t"):
            return True
        elif char not in " \t":
            previous = char
        index += 1
    return quote != ""


def _candidate_tag_error(
    parsed: CheckedFile, offset: int, certain: bool = True, line: int = 0
) -> Diagnostic:
    text = parsed.text
    match = re.match(r"![^\s,\[\]{}]*", text[offset : offset + 200])
    line = line or text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    error = _tag_error(parsed.display, match[0] if match else "!", line, column)
    if certain:
        return error
    return replace(
        error,
        summary=f"`{error.found}` may be a YAML tag, and this file is too large to tell: "
        "quote the value if the `!` is part of it",
    )


def invalid_tag_errors(parsed: CheckedFile, message: str) -> list[Diagnostic]:
    """yaml-rs refused a tag (it says which, not where): find it, and any others."""
    found = tag_errors(parsed) if "!" in parsed.text else []
    if found:
        return found
    match = _INVALID_TAG.search(message)
    tag = match[1] if match else "!"
    offset = parsed.text.find(tag)
    if offset < 0:
        return [_tag_error(parsed.display, tag, 1, 1)]
    return [_candidate_tag_error(parsed, offset)]
