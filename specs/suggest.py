"""Closest-name suggestions for typos ("did you mean `nominalQuota`?")."""

from __future__ import annotations

from collections.abc import Iterable


def closest_name(word: str, candidates: Iterable[str]) -> str:
    """The candidate closest to `word`, or "" when nothing is close enough to help."""
    import difflib

    pool = sorted(set(candidates))
    if not pool:
        return ""
    lowered = {c.lower(): c for c in pool}
    if word.lower() in lowered:
        return lowered[word.lower()]
    matches = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if matches:
        return matches[0]
    matches = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[matches[0]] if matches else ""
