"""Templating of scalar strings with jinja2's immutable sandbox.

Templates are rendered after YAML parsing, on string values only, so line numbers stay
exact and a template can never inject YAML structure. Rendering happens once; the result
is never rendered again. Undefined variables are errors (StrictUndefined); the sandbox
(specs.template_sandbox) allows expressions only, bounded in time and size, so nothing in
a spec runs as code. One `RenderBudget` is shared by the documents of a load: plain
substitutions are charged for their output like templates rendered by jinja2.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainform.specs.yamlio import MAX_DEPTH

MAX_OUTPUT = 64 * 1024
"""Characters one templated value may render to."""
MAX_DOCUMENT_OUTPUT = 1024 * 1024
MAX_DOCUMENT_ITERATIONS = 10_000
MAX_DOCUMENT_SECONDS = 1.0
MAX_LOAD_OUTPUT = 32 * 1024 * 1024
MAX_LOAD_ITERATIONS = 1_000_000
MAX_LOAD_SECONDS = 10.0

_UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined")
_SUBSTITUTION = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_ANY_MARKER = re.compile(r"\{[{%#]")


@dataclass(frozen=True, slots=True)
class TemplateProblem:
    path: tuple[str | int, ...]
    message: str
    undefined: str = ""
    limit: str = ""
    """The bound a template went past (its diagnostic is then a `template-limit`)."""


class TemplateLimitExceeded(Exception):
    """Rendering went past one of the bounds; `limit` says which, as the user reads it."""

    def __init__(self, summary: str, limit: str) -> None:
        super().__init__(summary)
        self.summary = summary
        self.limit = limit


class RenderBudget:
    """What rendering may still spend: per load, and for the document being rendered.

    One budget lives for a whole load; `start_document` opens a document's share (the
    smaller of the per-document limits and what the load has left) and `finish_document`
    charges the time it took to the load. Counters only go down.
    """

    def __init__(self) -> None:
        self.load_iterations = MAX_LOAD_ITERATIONS
        self.load_output = MAX_LOAD_OUTPUT
        self.load_seconds = MAX_LOAD_SECONDS
        self.iterations = MAX_DOCUMENT_ITERATIONS
        self.output = MAX_DOCUMENT_OUTPUT
        self._started = time.monotonic()
        self._deadline = self._started + MAX_DOCUMENT_SECONDS

    def start_document(self) -> None:
        self.iterations = MAX_DOCUMENT_ITERATIONS
        self.output = MAX_DOCUMENT_OUTPUT
        self._started = time.monotonic()
        self._deadline = self._started + max(0.0, min(MAX_DOCUMENT_SECONDS, self.load_seconds))

    def finish_document(self) -> None:
        self.load_seconds -= time.monotonic() - self._started

    def step(self) -> None:
        """One loop iteration."""
        self.iterations -= 1
        self.load_iterations -= 1
        if self.iterations < 0:
            raise TemplateLimitExceeded(
                "templates of this document loop too many times",
                f"at most {MAX_DOCUMENT_ITERATIONS:,} loop iterations per document, "
                "nested loops counted together",
            )
        if self.load_iterations < 0:
            raise TemplateLimitExceeded(
                "templates of the spec folder loop too many times",
                f"at most {MAX_LOAD_ITERATIONS:,} loop iterations in all documents together",
            )
        self.check_time()

    def emit(self, size: int) -> None:
        """`size` more characters of output."""
        self.output -= size
        self.load_output -= size
        if self.output < 0:
            raise TemplateLimitExceeded(
                "templates of this document render too much text",
                f"at most {MAX_DOCUMENT_OUTPUT:,} characters rendered per document",
            )
        if self.load_output < 0:
            raise TemplateLimitExceeded(
                "templates of the spec folder render too much text",
                f"at most {MAX_LOAD_OUTPUT:,} characters rendered in all documents together",
            )
        self.check_time()

    def check_time(self) -> None:
        if time.monotonic() > self._deadline:
            if self.load_seconds < MAX_DOCUMENT_SECONDS:
                raise TemplateLimitExceeded(
                    "templates of the spec folder take too long to render",
                    f"at most {MAX_LOAD_SECONDS:g} s of rendering in all documents together",
                )
            raise TemplateLimitExceeded(
                "templates of this document take too long to render",
                f"at most {MAX_DOCUMENT_SECONDS:g} s of rendering per document",
            )


def has_template(text: str) -> bool:
    return "{" in text and _ANY_MARKER.search(text) is not None


def render_document(
    document: Any, variables: Mapping[str, Any], budget: RenderBudget | None = None
) -> tuple[Any, list[TemplateProblem]]:
    """Render every templated string in `document`; returns the result and the problems.

    `budget` is the load's (a fresh one when None); this document's share is opened here.
    """
    problems: list[TemplateProblem] = []
    budget = budget if budget is not None else RenderBudget()
    plain_variables: dict[str, Any] = {}  # a copy for jinja2, made on first use
    over_limit: list[TemplateLimitExceeded] = []  # after one breach the rest is not rendered

    def substitute(value: str, path: tuple[str | int, ...]) -> str:
        """Plain `{{ name }}` substitutions (most templates) need no template engine."""
        names = _SUBSTITUTION.findall(value)
        missing = next((name for name in names if name not in variables), None)
        if missing is not None:
            problems.append(TemplateProblem(path, f"'{missing}' is undefined", missing))
            return value
        texts = {name: str(variables[name]) for name in names}
        size = len(value) + sum(len(texts[name]) for name in names)  # an upper bound
        if size > MAX_OUTPUT:
            size = len(_SUBSTITUTION.sub("", value)) + sum(len(texts[name]) for name in names)
            if size > MAX_OUTPUT:
                raise TemplateLimitExceeded(
                    "template result is too large", f"at most {MAX_OUTPUT:,} characters per value"
                )
        budget.emit(size)
        return _SUBSTITUTION.sub(lambda m: texts[m[1]], value)

    def limit_reached(path: tuple[str | int, ...], exc: TemplateLimitExceeded) -> None:
        over_limit.append(exc)
        problems.append(TemplateProblem(path, exc.summary, limit=exc.limit))

    def render_string(value: str, path: tuple[str | int, ...]) -> str:
        if over_limit:
            return value
        try:
            if not _ANY_MARKER.search(_SUBSTITUTION.sub("", value)):
                return substitute(value, path)
        except TemplateLimitExceeded as exc:
            limit_reached(path, exc)
            return value
        from jinja2 import TemplateError, TemplateSyntaxError, UndefinedError
        from jinja2.exceptions import SecurityError
        from trainform.specs.template_sandbox import render

        if not plain_variables:
            plain_variables.update(variables)
        try:
            return render(value, plain_variables, budget)
        except TemplateLimitExceeded as exc:
            limit_reached(path, exc)
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

    budget.start_document()
    try:
        return visit(document, ()), problems
    finally:
        budget.finish_document()


class NestingTooDeep(Exception):
    """A templated document nests deeper than the loader allows (checked while walking)."""
