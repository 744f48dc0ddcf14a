"""Templating of scalar strings with jinja2's immutable sandbox.

Templates are rendered after YAML parsing, on string values only, so line numbers stay
exact and a template can never inject YAML structure. Rendering happens once; the result
is never rendered again. Undefined variables are errors (StrictUndefined); the sandbox
(specs.template_sandbox) allows expressions only, bounded in time and size, so nothing in
a spec runs as code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specs.yamlio import MAX_DEPTH

_UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined")
_SUBSTITUTION = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_ANY_MARKER = re.compile(r"\{[{%#]")


@dataclass(frozen=True, slots=True)
class TemplateProblem:
    path: tuple[str | int, ...]
    message: str
    undefined: str = ""


def has_template(text: str) -> bool:
    return "{" in text and _ANY_MARKER.search(text) is not None


def _render(text: str, variables: Mapping[str, Any]) -> str:
    from specs.template_sandbox import render

    return render(text, dict(variables))


def render_document(
    document: Any, variables: Mapping[str, Any]
) -> tuple[Any, list[TemplateProblem]]:
    """Render every templated string in `document`; returns the result and the problems."""
    problems: list[TemplateProblem] = []

    def render_string(value: str, path: tuple[str | int, ...]) -> str:
        # Plain `{{ name }}` substitutions (most templates) need no template engine.
        if not _ANY_MARKER.search(_SUBSTITUTION.sub("", value)):
            names = _SUBSTITUTION.findall(value)
            missing = next((name for name in names if name not in variables), None)
            if missing is None:
                return _SUBSTITUTION.sub(lambda m: str(variables[m[1]]), value)
            problems.append(TemplateProblem(path, f"'{missing}' is undefined", missing))
            return value
        from jinja2 import TemplateError, TemplateSyntaxError, UndefinedError
        from jinja2.exceptions import SecurityError

        try:
            return _render(value, variables)
        except UndefinedError as exc:
            match = _UNDEFINED_NAME.search(str(exc))
            problems.append(TemplateProblem(path, str(exc), match[1] if match else ""))
        except TemplateSyntaxError as exc:
            problems.append(TemplateProblem(path, f"template syntax error: {exc.message}"))
        except SecurityError as exc:
            problems.append(TemplateProblem(path, f"template refused by the sandbox: {exc}"))
        except (MemoryError, RecursionError):
            problems.append(TemplateProblem(path, "template is too large to render"))
        except (TemplateError, ArithmeticError, TypeError, ValueError) as exc:
            problems.append(TemplateProblem(path, f"template failed: {exc}"))
        return value

    def visit(value: Any, path: tuple[str | int, ...]) -> Any:
        if len(path) > MAX_DEPTH:
            raise NestingTooDeep
        """The value with templates rendered; the same object when nothing changed.

        Paths are built only for strings that hold a template and for containers."""
        if isinstance(value, str):
            return render_string(value, path) if has_template(value) else value
        if isinstance(value, dict):
            changed = None
            for key, child in value.items():
                if type(child) is str:
                    if "{" not in child or not has_template(child):
                        continue
                    new = render_string(child, (*path, key))
                elif isinstance(child, dict | list):
                    new = visit(child, (*path, key))
                else:
                    continue
                if new is not child:
                    changed = changed if changed is not None else dict(value)
                    changed[key] = new
            return value if changed is None else changed
        if isinstance(value, list):
            items = None
            for index, child in enumerate(value):
                if type(child) is str:
                    if "{" not in child or not has_template(child):
                        continue
                    new = render_string(child, (*path, index))
                elif isinstance(child, dict | list):
                    new = visit(child, (*path, index))
                else:
                    continue
                if new is not child:
                    items = items if items is not None else list(value)
                    items[index] = new
            return value if items is None else items
        return value

    return visit(document, ()), problems


class NestingTooDeep(Exception):
    """A templated document nests deeper than the loader allows (checked while walking)."""
