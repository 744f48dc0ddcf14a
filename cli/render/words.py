"""Counted nouns as people write them: `1 change`, `2 changes`, never `change(s)`."""

from __future__ import annotations

_IRREGULAR = {"policy": "policies", "entry": "entries"}


def plural(count: int, word: str, many: str | None = None) -> str:
    """`count` and `word`, the noun in the plural unless `count` is 1."""
    if count == 1:
        return f"{count} {word}"
    return f"{count:,} {many or _IRREGULAR.get(word) or word + 's'}"
