"""Line and column of a field path, for files that have diagnostics.

The fast loader keeps no positions. When a diagnostic needs one, the file is parsed once
more with ruamel's round-trip loader (which records line and column of every key and
value) and the field path is walked there. Only files with problems pay for this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError


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
