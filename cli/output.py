"""Output helpers shared by the CLI commands: printing diagnostics and exiting.

A failed load prints at most the run's budget of diagnostics (specs.diagnostic_budget)
and, with `max_chars` (`--max-chars`; Markdown always has one), no more characters.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click
from trainform.cli.options import TemplateInputs
from trainform.cli.render.diagnostics import render_diagnostics_json, render_diagnostics_text
from trainform.cli.render.style import use_color
from trainform.specs import SpecLoadError

if TYPE_CHECKING:
    from trainform.planner.workspace import Workspace

T = TypeVar("T")
EXIT_ERROR = 1


def print_diagnostics(
    error: SpecLoadError, output_format: str, max_chars: int | None = None
) -> None:
    """The diagnostics of a failed load: JSON, or text within `max_chars` characters (for
    Markdown, a pull-request comment, the plan's default budget when none is given)."""
    if output_format == "json":
        click.echo(render_diagnostics_json(error.diagnostics), nl=False)
        return
    if output_format == "markdown" and max_chars is None:
        from trainform.cli.render.plan_markdown import DEFAULT_BUDGET

        max_chars = DEFAULT_BUDGET
    files = len({d.location.file for d in error.diagnostics if d.location})
    click.echo(
        render_diagnostics_text(error.diagnostics, files, use_color(), max_chars),
        nl=False,
        color=use_color(),
    )


def load_or_exit(opener: Callable[[], T], output_format: str, max_chars: int | None = None) -> T:
    """Run a loader; on spec errors print the diagnostics (within `max_chars`) and exit 1."""
    try:
        loaded = opener()
    except SpecLoadError as error:
        print_diagnostics(error, output_format, max_chars)
        raise SystemExit(EXIT_ERROR) from None
    # What was loaded lives until the command ends: keep the collector from rescanning it,
    # and from here on collect rarely (cli.entry turned collection off for the load).
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    gc.enable()
    return loaded


def open_or_exit(
    spec_dir: str, inputs: TemplateInputs, output_format: str, max_chars: int | None = None
) -> Workspace:
    """The workspace of `spec_dir`; on spec errors print the diagnostics and exit 1."""
    from trainform.planner.workspace import open_workspace

    return load_or_exit(
        lambda: open_workspace(spec_dir, inputs.environment, inputs.variables, inputs.var_files),
        output_format,
        max_chars,
    )
