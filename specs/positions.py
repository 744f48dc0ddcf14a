"""Line and column of a field path, for files that have diagnostics.

The fast loader keeps no positions. When a diagnostic needs one, the file is parsed once
more with ruamel's round-trip loader (which records line and column of every key and
value) and the field path is walked there. Only files with problems pay for this.

ruamel composes a few thousand values a second, so a text over LARGE_TEXT is never
composed: `EventMap` walks its parser events only as far as the path asked for, within an
event budget (`Walk`). The same walk finds tags and the written text of plain scalars for
the YAML checks of specs.yamlio, stopping once past what it looks for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError
from trainform.specs.event_budget import EventBudget

LARGE_TEXT = 16 * 1024
"""Texts larger than this are not composed by ruamel (too slow): their events are walked."""


def source_map(text: str, duplicates: bool = False) -> SourceMap | EventMap:
    """The position finder suited to `text`: events for a large text, and for one with a
    duplicate key (ruamel refuses to compose it; the walk keeps the last, as the loader)."""
    if duplicates:
        return EventMap(text, last_wins=True)
    return EventMap(text) if len(text) > LARGE_TEXT else SourceMap(text)


def _round_trip_loader() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


def ruamel_error_position(text: str) -> tuple[int, int, str]:
    """(line, column, problem) of the first error ruamel finds in `text`, 1-based."""
    try:
        for _ in _round_trip_loader().load_all(text):
            pass
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(part for part in (exc.context, exc.problem) if part)
        if mark is not None:
            return mark.line + 1, mark.column + 1, problem.replace("\n", " ")
        return 1, 1, problem
    except Exception as exc:  # noqa: BLE001 - positions are best effort
        return 1, 1, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return 1, 1, ""


class SourceMap:
    """Positions of keys and values in one file, built on first use."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._documents: list[Any] | None = None

    def _load(self) -> list[Any]:
        if self._documents is None:
            try:
                docs = [doc for doc in _round_trip_loader().load_all(self._text)]
            except Exception:  # noqa: BLE001 - positions are best effort; the fast parse decides
                docs = []
            self._documents = [doc for doc in docs if doc is not None]
        return self._documents

    def locate(
        self, document: int, path: Sequence[str | int], key: bool = False, start_line: int = 1
    ) -> tuple[int, int]:
        """1-based position of `path` in document `document`.

        With `key=True` the position of the mapping key itself (for unknown fields);
        otherwise of its value. A path that does not exist (a missing field) resolves to
        the deepest ancestor that does.
        """
        docs = self._load()
        fallback = (start_line, 1)
        if document >= len(docs):
            return fallback
        node = docs[document]
        position = fallback
        for index, step in enumerate(path):
            last = index == len(path) - 1
            if isinstance(node, CommentedMap) and step in node:
                line, column = node.lc.key(step) if (key and last) else node.lc.value(step)
                position = (line + 1, column + 1)
                node = node[step]
            elif isinstance(node, CommentedSeq) and isinstance(step, int) and 0 <= step < len(node):
                line, column = node.lc.item(step)
                position = (line + 1, column + 1)
                node = node[step]
            else:
                break
        return position


# Events, walked lazily: for documents too large to compose, and for the scans of tags and
# numbers, which stop as soon as they have passed what they look for.

MAX_EVENTS = 20_000
"""Parser events one walk may read: ruamel reads 4,000 to 20,000 a second."""

STANDARD_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq")
)


@dataclass(frozen=True, slots=True)
class Node:
    """One node met by a walk: its path in its document and where it starts (1-based)."""

    document: int
    path: tuple[str | int, ...] | None
    """None inside a key that is a mapping or a list (such values have no path)."""
    line: int
    column: int
    offset: int
    is_key: bool
    """A mapping key: `path` is the path of the value it names."""
    key: tuple[int, int] | None
    """Position of the mapping key this node is the value of, if any."""
    tag: str | None
    plain: str | None
    """The text of a plain (unquoted, untagged, not block) scalar; None for anything else."""


class Walk:
    """The nodes of a text, lazily; `complete` is False when the walk stopped early (its
    event budget ran out, or ruamel could not parse what the fast parser accepted)."""

    def __init__(self, text: str, budget: EventBudget | None = None) -> None:
        self.text = text
        self.budget = budget if budget is not None else EventBudget(MAX_EVENTS)
        self.complete = True

    def __iter__(self) -> Iterator[Node]:
        if self.budget.events <= 0:  # spent: not even a parser set up (files add up)
            self.complete = False
            return
        try:
            yield from _nodes(self.text, self.budget)
        except _BudgetSpent:
            self.complete = False
        except Exception:  # noqa: BLE001 - positions are best effort; the fast parse decides
            self.complete = False


class _BudgetSpent(Exception):
    pass


class _Frame:
    __slots__ = ("path", "mapping", "index", "key", "key_position", "expect_key")

    def __init__(self, path: tuple[str | int, ...] | None, mapping: bool) -> None:
        self.path = path
        self.mapping = mapping
        self.index = 0
        self.key: str | None = None
        self.key_position: tuple[int, int] | None = None
        self.expect_key = True


def _nodes(text: str, budget: EventBudget) -> Iterator[Node]:
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        DocumentStartEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceStartEvent,
    )

    document = -1
    stack: list[_Frame] = []

    def completed(key: str | None, position: tuple[int, int] | None) -> None:
        if not stack:
            return
        parent = stack[-1]
        if not parent.mapping:
            parent.index += 1
        elif parent.expect_key:
            parent.key, parent.key_position, parent.expect_key = key, position, False
        else:
            parent.expect_key = True

    for event in _round_trip_loader().parse(text):
        budget.events -= 1
        if budget.events < 0:
            raise _BudgetSpent
        if isinstance(event, DocumentStartEvent):
            document += 1
            stack = []
            continue
        if isinstance(event, CollectionEndEvent):
            stack.pop()
            completed(None, None)
            continue
        if not isinstance(event, ScalarEvent | AliasEvent | MappingStartEvent | SequenceStartEvent):
            continue
        mark = event.start_mark
        position = (mark.line + 1, mark.column + 1)
        parent = stack[-1] if stack else None
        scalar = isinstance(event, ScalarEvent)
        is_key = parent is not None and parent.mapping and parent.expect_key
        key_position = None
        path: tuple[str | int, ...] | None
        if parent is None:
            path = ()
        elif parent.path is None:
            path = None
        elif is_key:
            path = (*parent.path, event.value) if scalar else None
        elif parent.mapping:
            path = None if parent.key is None else (*parent.path, parent.key)
            key_position = parent.key_position
        else:
            path = (*parent.path, parent.index)
        tag = getattr(event, "tag", None)
        yield Node(
            document,
            path,
            *position,
            mark.index,
            is_key,
            key_position,
            tag if isinstance(tag, str) else None,
            event.value if scalar and event.style is None and tag is None else None,
        )
        if isinstance(event, MappingStartEvent | SequenceStartEvent):
            stack.append(_Frame(None if is_key else path, isinstance(event, MappingStartEvent)))
        else:
            completed(event.value if scalar else None, position)


def first_duplicate_key(text: str) -> tuple[int, int] | None:
    """Position of the first key repeated in its mapping (the fast parser has no positions)."""
    seen: set[tuple[int, tuple[str | int, ...]]] = set()
    for node in Walk(text):
        if node.is_key and node.path is not None:
            if (node.document, node.path) in seen:
                return node.line, node.column
            seen.add((node.document, node.path))
    return None


class EventMap:
    """Positions of paths in one text, found by walking events only as far as needed.

    Same contract as SourceMap.locate; used for documents too large to compose with
    ruamel. A path not reached within the walk's event budget resolves to its deepest
    ancestor seen."""

    def __init__(
        self, text: str, last_wins: bool = False, budget: EventBudget | None = None
    ) -> None:
        self._nodes = iter(Walk(text, budget))
        self._seen: dict[tuple[int, tuple[str | int, ...]], Node] = {}
        if last_wins:  # a repeated key: walk it all (within budget) so the last one counts
            for node in self._nodes:
                if node.path is not None and not node.is_key:
                    self._seen[(node.document, node.path)] = node

    def _reach(self, document: int, path: tuple[str | int, ...]) -> Node | None:
        """The node at `path`, walking on until it is met or cannot come any more (the walk
        left the container that would hold it, or passed it in a list)."""
        target = (document, path)
        if target in self._seen:
            return self._seen[target]
        parent = path[:-1]
        for node in self._nodes:
            if node.path is None or node.is_key:
                continue
            self._seen[(node.document, node.path)] = node
            if (node.document, node.path) == target:
                return node
            if node.document > document:
                return None
            if node.document == document and (document, parent) in self._seen:
                if node.path[: len(parent)] != parent:
                    return None
                step = node.path[len(parent)] if len(node.path) > len(parent) else None
                if path and isinstance(step, int) and isinstance(path[-1], int) and step > path[-1]:
                    return None
        return None

    def node(self, document: int, path: Sequence[str | int]) -> Node | None:
        """The node at `path` (a value, not a key), if the walk reaches it."""
        return self._reach(document, tuple(path))

    def locate(
        self, document: int, path: Sequence[str | int], key: bool = False, start_line: int = 1
    ) -> tuple[int, int]:
        wanted = tuple(path)
        for length in range(len(wanted), -1, -1):
            node = self._reach(document, wanted[:length])
            if node is None:
                continue
            if key and length == len(wanted) and node.key is not None:
                return node.key
            return node.line, node.column
        return start_line, 1
