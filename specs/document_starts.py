"""Where each document of a multi-document YAML text starts, as the parser counts them.

The fast parser (yaml-rs, in specs.yamlio) returns a file's documents without positions;
`document_starts` finds the line and offset each one starts at, so specs.yamlio can give
every document its first line and its span of text, and specs.yaml_tags can walk only
the documents that may hold a tag.
"""

from __future__ import annotations

import re

_MARKER_LINE = re.compile(r"^(---|\.\.\.)(?=[ \t]|$)(.*)$", re.MULTILINE)
_CONTENT_LINE = re.compile(r"^(?![ \t]*(?:#|$))", re.MULTILINE)


def document_starts(text: str) -> list[tuple[int, int]]:
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
