"""Rendering the templates of one spec document: `render_document`.

Called by the loader (specs.document_loading) for each templated document and by
specs.environment_specs to render a document for another environment. Each templated
string is rendered once, within the bounds of specs.templating: a plain `{{ name }}`
substitution here, anything else by jinja2's sandbox (specs.template_sandbox, imported on
first use: most loads never need jinja2). Problems are collected, never raised, except a
document nested too deeply (`NestingTooDeep`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from trainform.specs.templating import (
    MAX_OUTPUT,
    NestingTooDeep,
    RenderBudget,
    TemplateLimitExceeded,
    TemplateProblem,
    has_template,
)
from trainform.specs.yamlio import MAX_DEPTH

_UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined")
_SUBSTITUTION = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

_RenderString = Callable[[str, tuple[str | int, ...]], str]


def render_document(
    document: Any, variables: Mapping[str, Any], budget: RenderBudget | None = None
) -> tuple[Any, list[TemplateProblem]]:
    """Render every templated string in `document`; returns the result and the problems.

    `budget` is the load's (a fresh one when None); this document's share is opened here.
    """
    renderer = _StringRenderer(variables, budget if budget is not None else RenderBudget())
    renderer.budget.start_document()
    try:
        return _render_templates(document, (), renderer.render), renderer.problems
    finally:
        renderer.budget.finish_document()


class _StringRenderer:
    """Renders the templated strings of one document and keeps their problems; after one
    breach of a limit the rest are left as written."""

    __slots__ = ("variables", "budget", "problems", "plain_variables", "over_limit")

    def __init__(self, variables: Mapping[str, Any], budget: RenderBudget) -> None:
        self.variables = variables
        self.budget = budget
        self.problems: list[TemplateProblem] = []
        self.plain_variables: dict[str, Any] = {}  # a copy for jinja2, made on first use
        self.over_limit = False

    def render(self, value: str, path: tuple[str | int, ...]) -> str:
        if self.over_limit:
            return value
        try:
            if not has_template(_SUBSTITUTION.sub("", value)):
                return self.substitute(value, path)
        except TemplateLimitExceeded as exc:
            self.stop_at_limit(path, exc)
            return value
        return self.render_in_sandbox(value, path)

    def substitute(self, value: str, path: tuple[str | int, ...]) -> str:
        """Plain `{{ name }}` substitutions (most templates) need no template engine."""
        variables = self.variables
        names = _SUBSTITUTION.findall(value)
        missing = next((name for name in names if name not in variables), None)
        if missing is not None:
            self.problems.append(TemplateProblem(path, f"'{missing}' is undefined", missing))
            return value
        texts = {name: str(variables[name]) for name in names}
        size = len(value) + sum(len(texts[name]) for name in names)  # an upper bound
        if size > MAX_OUTPUT:
            size = len(_SUBSTITUTION.sub("", value)) + sum(len(texts[name]) for name in names)
            if size > MAX_OUTPUT:
                raise TemplateLimitExceeded(
                    "template result is too large", f"at most {MAX_OUTPUT:,} characters per value"
                )
        self.budget.emit(size)
        return _SUBSTITUTION.sub(lambda m: texts[m[1]], value)

    def stop_at_limit(self, path: tuple[str | int, ...], exc: TemplateLimitExceeded) -> None:
        self.over_limit = True
        self.problems.append(TemplateProblem(path, exc.summary, limit=exc.limit))

    def render_in_sandbox(self, value: str, path: tuple[str | int, ...]) -> str:
        from jinja2 import TemplateError, TemplateSyntaxError, UndefinedError
        from jinja2.exceptions import SecurityError
        from trainform.specs.template_sandbox import render

        if not self.plain_variables:
            self.plain_variables.update(self.variables)
        problems = self.problems
        try:
            return render(value, self.plain_variables, self.budget)
        except TemplateLimitExceeded as exc:
            self.stop_at_limit(path, exc)
        except UndefinedError as exc:
            match = _UNDEFINED_NAME.search(str(exc))
            problems.append(TemplateProblem(path, str(exc), match[1] if match else ""))
        except TemplateSyntaxError as exc:
            problems.append(TemplateProblem(path, f"template syntax error: {exc.message}"))
        except SecurityError as exc:
            problems.append(TemplateProblem(path, f"template refused by the sandbox: {exc}"))
        except (MemoryError, RecursionError):
            problems.append(
                TemplateProblem(
                    path, "template is too large to render", limit="a smaller, shallower template"
                )
            )
        except (TemplateError, ArithmeticError, TypeError, ValueError) as exc:
            problems.append(TemplateProblem(path, f"template failed: {exc}"))
        return value


def _render_templates(value: Any, path: tuple[str | int, ...], render: _RenderString) -> Any:
    """`value` with each templated string rendered by `render`; the same object when
    nothing changed. Paths are built only for strings that hold a template and for
    containers."""
    if len(path) > MAX_DEPTH:
        raise NestingTooDeep
    if isinstance(value, str):
        return render(value, path) if has_template(value) else value
    if isinstance(value, dict):
        changed = None
        for key, child in value.items():
            if type(child) is str:
                if "{" not in child or not has_template(child):
                    continue
                new = render(child, (*path, key))
            elif isinstance(child, dict | list):
                new = _render_templates(child, (*path, key), render)
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
                new = render(child, (*path, index))
            elif isinstance(child, dict | list):
                new = _render_templates(child, (*path, index), render)
            else:
                continue
            if new is not child:
                items = items if items is not None else list(value)
                items[index] = new
        return value if items is None else items
    return value
