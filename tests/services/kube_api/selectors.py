"""Label and field selectors as the list endpoint's `labelSelector` / `fieldSelector` parse them.

Label selectors follow k8s.io/apimachinery/pkg/labels: comma-separated requirements, each
`key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`,
`key>1`, `key<1`. `!=` and `notin` also match objects without the key. Field selectors accept
`metadata.name` and `metadata.namespace` (all a CRD supports) with `=`, `==`, `!=`.
A malformed selector raises `ApiError` 400 BadRequest, like the real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.services.kube_api.errors import ApiError, bad_request

Matcher = Callable[[dict[str, Any]], bool]

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_BINARY = re.compile(rf"^\s*({_KEY})\s*(==|=|!=|>|<)\s*({_VALUE})\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(selector):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(selector[start:index])
            start = index + 1
    parts.append(selector[start:])
    return parts


def _requirement(text: str) -> Callable[[dict[str, str]], bool]:
    if match := _SET.match(text):
        key, operator = match[1], match[2]
        values = {v.strip() for v in match[3].split(",")}
        if not all(re.fullmatch(_VALUE, v) for v in values) or values == {""}:
            raise bad_request(f"unable to parse requirement: values for '{key}' are invalid")
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _BINARY.match(text):
        key, operator, value = match[1], match[2], match[3]
        if operator in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        if not value.lstrip("-").isdigit():
            raise bad_request(
                f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be "
                f"an integer: {value!r}"
            )
        bound = int(value)

        def compare(labels: dict[str, str]) -> bool:
            found = labels.get(key)
            if found is None or not found.lstrip("-").isdigit():
                return False
            return int(found) > bound if operator == ">" else int(found) < bound

        return compare
    if match := _EXISTS.match(text):
        negate, key = match[1] == "!", match[2]
        return lambda labels: (key in labels) != negate
    raise bad_request(
        f"unable to parse requirement: found '{text.strip()}', expected a requirement"
    )


def label_matcher(selector: str | None) -> Matcher:
    """Match an object's metadata.labels against a labelSelector string ('' matches all)."""
    if not selector or not selector.strip():
        return lambda _obj: True
    requirements = [_requirement(part) for part in _split(selector)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(requirement(labels) for requirement in requirements)

    return matches


_FIELDS = {"metadata.name": "name", "metadata.namespace": "namespace"}


def field_matcher(selector: str | None) -> Matcher:
    """Match metadata.name / metadata.namespace against a fieldSelector string."""
    if not selector or not selector.strip():
        return lambda _obj: True
    checks: list[tuple[str, bool, str]] = []
    for part in selector.split(","):
        match = re.fullmatch(r"\s*([A-Za-z.]+)\s*(==|=|!=)\s*(\S*)\s*", part)
        if match is None:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        if match[1] not in _FIELDS:
            raise ApiError(
                400,
                "BadRequest",
                f'"{match[1]}" is not a known field selector: '
                f'only "metadata.name", "metadata.namespace"',
            )
        checks.append((_FIELDS[match[1]], match[2] != "!=", match[3]))

    def matches(obj: dict[str, Any]) -> bool:
        metadata = obj.get("metadata") or {}
        return all((metadata.get(key, "") == value) == equal for key, equal, value in checks)

    return matches
