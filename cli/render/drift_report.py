"""Drift reports as Markdown (to post) and as one self-contained HTML file (to attach,
open offline and print), both rendered through jinja2 templates (cli/render/templates)
from the view every drift renderer shares (cli.render.drift_view).

The HTML has no external assets (inline style, no scripts, no fonts or images fetched) and
is autoescaped; Markdown cells escape `|`, `<` and line breaks. Both are redacted.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape
from trainform.cli.render.drift_view import build_view
from trainform.planner.drift_model import DriftReport
from trainform.specs.secrets import redact

_TEMPLATES = Path(__file__).with_name("templates")


def _md(value: Any) -> str:
    """One line of Markdown text: `<` as an entity, line breaks and other control or
    separator characters written as escapes, so a value never starts a new line."""
    text = str(value).replace("<", "&lt;")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _cell(value: Any) -> str:
    return _md(str(value).replace("\\", "\\\\")).replace("|", "\\|")


def _code_spans(value: Any) -> Markup:
    """Escaped text with `quoted` commands shown as code."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(value))))


@functools.cache
def template_environment(html: bool) -> Environment:
    environment = Environment(
        loader=FileSystemLoader(_TEMPLATES),
        autoescape=html,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.filters.update(md=_md, cell=_cell, code_spans=_code_spans)
    return environment


def render_drift_markdown(report: DriftReport) -> str:
    template = template_environment(False).get_template("drift.md.j2")
    text = template.render(view=build_view(report))
    return redact(re.sub(r"\n{3,}", "\n\n", text).strip() + "\n")


def render_drift_html(report: DriftReport) -> str:
    template = template_environment(True).get_template("drift.html.j2")
    return redact(template.render(view=build_view(report)))
