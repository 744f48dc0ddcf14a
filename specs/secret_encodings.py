"""Known secret values in every form a server may echo them, found in one pass over a text.

Called by `specs.secrets` (the `Redactor` behind `redact`), lowest layer. A value registered
as a secret is looked for as it is and in the forms a service, a proxy or an error page may
turn it into:

- escaped inside JSON text (Python's and Go's escaping) and inside a Python repr;
- base64 of the value, standard and URL-safe alphabets, with and without padding, and the
  part of it that stays the same wherever the value sits inside a longer base64 text (the
  value after `someone:` in a Basic credential whose user name is not known);
- hex, lower and upper case;
- percent-encoded, with `%20` or `+` for a space and upper or lower case hex digits.

A user name and password pair adds the base64 and hex of `user:password`: the Basic
credential without its `Basic` keyword. A match inside a run of base64 (or hex) characters
is widened to the whole run, so no part of the encoded secret is left beside the mark.

`KnownValues` holds every form of a fixed set of values as one trie-shaped regular
expression (a common prefix is matched once), so a text is searched once whatever the
number of values. `known_values(values, pairs)` builds it once per set and keeps it.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

MINIMUM_CORE = 8
"""Shortest base64 run kept as a form of a value inside a longer base64 text: 6 bytes of
the value, too many to be met by chance."""

PLAIN, BASE64, HEX = "plain", "base64", "hex"
_BASE64_CHARACTERS = frozenset(string.ascii_letters + string.digits + "+/_-")
_HEX_CHARACTERS = frozenset(string.hexdigits)
_WIDEN = {
    BASE64: (_BASE64_CHARACTERS, re.compile(r"[A-Za-z0-9+/_-]*=*")),
    HEX: (_HEX_CHARACTERS, re.compile(r"[0-9a-fA-F]*")),
}
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
_PERCENT = re.compile(r"%[0-9A-F]{2}")
_ESCAPE_START = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")
_ENCODERS = (base64.b64encode, base64.urlsafe_b64encode)


def _base64_forms(data: bytes) -> set[str]:
    """base64 of `data` whole (both alphabets, padded or not), and the runs that stay the
    same when `data` follows 0, 1 or 2 other bytes and is followed by more."""
    forms: set[str] = set()
    for encode in _ENCODERS:
        whole = encode(data).decode("ascii")
        forms |= {whole, whole.rstrip("=")}
        for offset in range(3):
            encoded = encode(b"\0" * offset + data).decode("ascii")
            first = 4 if offset else 0  # the first group holds the bytes before the value
            core = encoded[first : 4 * ((offset + len(data)) // 3)]
            if len(core) >= MINIMUM_CORE:
                forms.add(core)
    return forms | {form.replace("/", "\\/") for form in forms if "/" in form}


def _text_forms(value: str) -> set[str]:
    """`value` as JSON text, a repr and a URL carry it."""
    escaped = json.dumps(value)[1:-1]
    unicode = json.dumps(value, ensure_ascii=False)[1:-1]
    go = "".join(_GO_ESCAPES.get(c, c) for c in unicode)
    forms = {value, escaped, unicode, go, repr(value)[1:-1]}
    for encoded in (quote(value, safe=""), quote(value), quote_plus(value)):
        forms |= {encoded, _PERCENT.sub(lambda m: m.group(0).lower(), encoded)}
    return forms


@functools.lru_cache(maxsize=1024)
def value_forms(value: str) -> dict[str, str]:
    """Every form of `value` to look for, each with its kind (plain, base64, hex)."""
    data = value.encode("utf-8")
    forms = dict.fromkeys(_base64_forms(data), BASE64)
    forms.update(dict.fromkeys((data.hex(), data.hex().upper()), HEX))
    forms.update(dict.fromkeys(_text_forms(value), PLAIN))  # plain wins a tie: not widened
    return forms


@functools.lru_cache(maxsize=256)
def pair_forms(username: str, password: str) -> dict[str, str]:
    """The forms of the `username:password` pair a Basic credential encodes."""
    data = f"{username}:{password}".encode()
    forms: dict[str, str] = {}
    for encode in _ENCODERS:
        whole = encode(data).decode("ascii")
        forms.update(dict.fromkeys((whole, whole.rstrip("=")), BASE64))
    forms.update(dict.fromkeys((data.hex(), data.hex().upper()), HEX))
    return forms


_Trie = dict[str, "_Trie"]


def _trie_pattern(words: Iterable[str]) -> str:
    """A regular expression matching any of `words`, the longest where several start at
    one place, with each shared prefix written once."""
    root: _Trie = {}
    for word in words:
        node = root
        for character in word:
            node = node.setdefault(character, {})
        node[""] = {}
    return _node_pattern(root)


def _node_pattern(node: _Trie) -> str:
    branches = []
    for character in sorted(key for key in node if key):
        literal, child = character, node[character]
        while len(child) == 1 and "" not in child:  # a chain without a fork: one literal
            ((following, child),) = child.items()
            literal += following
        branches.append(re.escape(literal) + _node_pattern(child))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in node else body


@dataclass(frozen=True)
class KnownValues:
    """Every form of a fixed set of secret values, and the spans of a text they cover."""

    pattern: re.Pattern[str] | None
    kinds: dict[str, str]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where forms of the values sit in `text`, widened and merged, in order."""
        if self.pattern is None:
            return []
        found = []
        for match in self.pattern.finditer(text):
            start, end = match.span()
            widen = _WIDEN.get(self.kinds.get(match.group(0), PLAIN))
            if widen is not None:
                characters, after = widen
                while start and text[start - 1] in characters:
                    start -= 1
                end = after.match(text, end).end()  # type: ignore[union-attr]
            found.append(_whole_escapes(text, start, end))
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def replace(self, text: str, mark: str) -> str:
        """`text` with each span of a known value replaced by `mark`."""
        spans = self.spans(text)
        if not spans:
            return text
        pieces, last = [], 0
        for start, end in spans:
            pieces += [text[last:start], mark]
            last = end
        pieces.append(text[last:])
        return "".join(pieces)


def _odd_backslashes(text: str, end: int) -> bool:
    """True when the backslashes just before `end` are an odd run: the last one escapes."""
    position = end
    while position and text[position - 1] == "\\":
        position -= 1
    return (end - position) % 2 == 1


def _whole_escapes(text: str, start: int, end: int) -> tuple[int, int]:
    """The span grown so it neither starts nor ends inside an escape (`\\n`, `\\u00e9`):
    a redacted JSON or repr text stays well formed."""
    head = _ESCAPE_START.search(text, max(0, start - 5), start)
    if head is not None and _odd_backslashes(text, head.start() + 1):
        start = head.start()
    tail = _ESCAPE_START.search(text, max(start, end - 5), end)
    if tail is not None and _odd_backslashes(text, tail.start() + 1):
        unicode = tail.group(0) != "\\" or text[end : end + 1] == "u"
        end = tail.start() + (6 if unicode else 2)
    return start, min(end, len(text))


@functools.lru_cache(maxsize=32)
def known_values(values: tuple[str, ...], pairs: frozenset[tuple[str, str]]) -> KnownValues:
    """The matcher of every form of `values` and of the `pairs` (user name, password)."""
    kinds: dict[str, str] = {}
    for username, password in sorted(pairs):
        kinds.update(pair_forms(username, password))
    for value in values:
        for form, kind in value_forms(value).items():
            if kinds.get(form) != PLAIN:
                kinds[form] = kind
    kinds = {form: kind for form, kind in kinds.items() if form}
    pattern = re.compile(_trie_pattern(kinds)) if kinds else None
    return KnownValues(pattern, kinds)
