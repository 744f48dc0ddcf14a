"""The files one load has parsed, and where a field path is written in them.

specs.loader adds each file it parses to one `LoadedFiles`; a diagnostic asks `locate`
for the line and column of a path, and the number check asks `written` for a value's
text as written. Each re-reads only the one document asked about, with specs.positions
(imported on first use: ruamel is slow to import, and most loads never need it), and
keeps what it built for the next question. The load's scan budget lives here too.

Working out a position re-reads a document with ruamel: costly, and what it builds stays
for the load. So positions are exact only while the run's diagnostic budget has room
(specs.diagnostic_budget), for at most twice as many documents as it holds: past that a
diagnostic would not be shown anyway, and `locate` answers with the document's first line
at once. The scan budget's `rereads` (of files with a parse error) start at its size too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainform.specs.diagnostic_budget import DiagnosticBudget
from trainform.specs.errors import Location
from trainform.specs.event_budget import EventBudget
from trainform.specs.yamlio import ParsedFile

SCAN_EVENTS = 10_000
"""YAML events one load may walk for the checks of tags and numbers (specs.positions)."""
EXACT_DOCUMENTS_PER_DIAGNOSTIC = 2
"""Documents re-read for exact positions, per diagnostic a run shows (its own, `related`)."""


class LoadedFiles:
    """Parsed files and their lazily built source maps, keyed by display path."""

    def __init__(self, budget: DiagnosticBudget | None = None) -> None:
        self.files: dict[str, ParsedFile] = {}
        self._maps: dict[tuple[str, int], Any] = {}
        self._walks: dict[tuple[str, int], Any] = {}
        self.budget = budget if budget is not None else DiagnosticBudget()
        self.scan = EventBudget(SCAN_EVENTS, rereads=self.budget.limit)
        self.exact_documents = EXACT_DOCUMENTS_PER_DIAGNOSTIC * self.budget.limit

    def add(self, parsed: ParsedFile) -> None:
        self.files[parsed.display] = parsed

    def locate(self, display: str, index: int, path: Sequence[str | int], key: bool) -> Location:
        """Position of `path` in document `index` of a file, re-reading only that document
        (the document's first line once the run's diagnostics are spent)."""
        from trainform.specs.positions import source_map as new_map

        parsed = self.files[display]
        if index not in parsed.indices:
            whole = self._maps.get((display, -1))
            if whole is None and not self._may_reread():
                return Location(display, 1, 1)
            if whole is None:
                whole = self._maps[(display, -1)] = new_map(parsed.text, parsed.salvaged)
            line, column = whole.locate(index, path, key, 1)
            return Location(display, line, column)
        position = parsed.indices.index(index)
        start_line = parsed.start_lines[position]
        source_map = self._maps.get((display, index))
        if source_map is None and not self._may_reread():
            return Location(display, start_line, 1)
        if source_map is None:
            begin, end = parsed.spans[position]
            source_map = self._maps[(display, index)] = new_map(
                parsed.text[begin:end], parsed.salvaged
            )
        line, column = source_map.locate(0, path, key, 1)
        return Location(display, line + start_line - 1, column)

    def fit_to_budget(self) -> None:
        """No more re-reads (of documents for positions, of files with a parse error) than
        the positions of the diagnostics the run still has room for may need."""
        room = self.budget.room
        self.exact_documents = min(self.exact_documents, EXACT_DOCUMENTS_PER_DIAGNOSTIC * room)
        if self.scan.rereads is not None:
            self.scan.rereads = min(self.scan.rereads, room)

    def _may_reread(self) -> bool:
        """Whether one more document is re-read for exact positions: while the run's
        diagnostics have room, for twice as many documents as they hold in all."""
        if self.exact_documents <= 0 or self.budget.spent:
            return False
        self.exact_documents -= 1
        return True

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
