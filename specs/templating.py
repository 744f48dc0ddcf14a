"""Templating of scalar strings: its bounds, what it reports, and what holds a template.

Templates are rendered after YAML parsing, on string values only, so line numbers stay
exact and a template can never inject YAML structure. Rendering happens once
(specs.template_rendering); the result is never rendered again. Undefined variables are
errors (StrictUndefined); the sandbox (specs.template_sandbox) allows expressions only,
bounded in time and size, so nothing in a spec runs as code. One `RenderBudget` is shared
by the documents of a load: plain substitutions are charged for their output like
templates rendered by jinja2. Both renderers, and the loader, take these names from here.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

MAX_OUTPUT = 64 * 1024
"""Characters one templated value may render to."""
MAX_DOCUMENT_OUTPUT = 1024 * 1024
MAX_DOCUMENT_ITERATIONS = 10_000
MAX_DOCUMENT_SECONDS = 1.0
MAX_LOAD_OUTPUT = 32 * 1024 * 1024
MAX_LOAD_ITERATIONS = 1_000_000
MAX_LOAD_SECONDS = 10.0

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


class NestingTooDeep(Exception):
    """A templated document nests deeper than the loader allows (checked while walking)."""
