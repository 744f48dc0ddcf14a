"""Templating of scalar strings with jinja2's immutable sandbox.

Templates are rendered after YAML parsing, on string values only, so line numbers stay
exact and a template can never inject YAML structure. Rendering happens once; the result
is never rendered again. Undefined variables are errors (StrictUndefined); the sandbox
refuses attribute access to internals and any mutation, so nothing in a spec runs as code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

_MARKERS = ("{{", "{%", "{#")
_UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined")


@dataclass(frozen=True, slots=True)
class TemplateProblem:
    path: tuple[str | int, ...]
    message: str
    undefined: str = ""


@lru_cache(maxsize=1)
def _environment() -> ImmutableSandboxedEnvironment:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
    )


def has_template(text: str) -> bool:
    return any(marker in text for marker in _MARKERS)


def _render(text: str, variables: Mapping[str, Any]) -> str:
    return _environment().from_string(text).render(variables)


def render_document(
    document: Any, variables: Mapping[str, Any]
) -> tuple[Any, list[TemplateProblem]]:
    """Render every templated string in `document`; returns the result and the problems."""
    from jinja2 import TemplateError, TemplateSyntaxError, UndefinedError
    from jinja2.exceptions import SecurityError

    problems: list[TemplateProblem] = []

    def visit(value: Any, path: tuple[str | int, ...]) -> Any:
        if isinstance(value, str):
            if not has_template(value):
                return value
            try:
                return _render(value, variables)
            except UndefinedError as exc:
                match = _UNDEFINED_NAME.search(str(exc))
                name = match[1] if match else ""
                problems.append(TemplateProblem(path, str(exc), name))
            except TemplateSyntaxError as exc:
                problems.append(TemplateProblem(path, f"template syntax error: {exc.message}"))
            except SecurityError as exc:
                problems.append(TemplateProblem(path, f"template refused by the sandbox: {exc}"))
            except (TemplateError, ArithmeticError, TypeError, ValueError) as exc:
                problems.append(TemplateProblem(path, f"template failed: {exc}"))
            return value
        if isinstance(value, dict):
            return {key: visit(child, (*path, key)) for key, child in value.items()}
        if isinstance(value, list):
            return [visit(child, (*path, index)) for index, child in enumerate(value)]
        return value

    return visit(document, ()), problems
