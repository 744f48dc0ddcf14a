"""`trainform init` and `trainform fmt`: starting a spec folder and keeping its YAML tidy.

Both are thin: specs.scaffold writes the starting files, specs.formatting formats; this
module parses flags, prints what happened and picks the exit code. `fmt --check` exits 2
when a file would change (as `plan --detailed-exitcode` does for changes), 1 on an error;
when any file cannot be formatted nothing is written.
"""

from __future__ import annotations

import sys

import click
from trainform.cli.render.diagnostics import render_diagnostics_text
from trainform.cli.render.style import use_color
from trainform.specs.diagnostic_budget import cap_per_run
from trainform.specs.formatting import format_folder, write_formatted
from trainform.specs.scaffold import init_folder

EXIT_WOULD_CHANGE = 2


@click.command()
@click.argument("folder", default=".", type=click.Path(file_okay=False, path_type=str))
def init(folder: str) -> None:
    """Write a starting trainform.yaml, .trainformignore, the JSON Schemas and editor
    settings into FOLDER (created if missing); existing files are kept."""
    result = init_folder(folder)
    for name in result.written:
        click.echo(f"wrote {name}")
    for name in result.kept:
        click.echo(f"kept  {name} (exists)")
    click.echo(f"\nNext: add spec files, then `trainform validate {folder}`.")


@click.command()
@click.argument("spec_dir", default=".", type=click.Path(file_okay=False, path_type=str))
@click.option(
    "--check",
    is_flag=True,
    help="Change nothing; list the files that would change and exit 2 if there are any.",
)
def fmt(spec_dir: str, check: bool) -> None:
    """Rewrite trainform.yaml and the spec files of SPEC_DIR in the canonical layout
    (comments, key order and quoting kept)."""
    result = format_folder(spec_dir)
    if result.problems:
        shown = cap_per_run(result.problems)
        click.echo(render_diagnostics_text(shown, color=use_color()), nl=False)
        click.echo("Nothing was formatted.", err=True)
        sys.exit(1)
    if check:
        for display in result.changed:
            click.echo(f"would reformat {display}")
        if result.changed:
            click.echo(f"{len(result.changed)} of {files(result.checked)} would be reformatted.")
            sys.exit(EXIT_WOULD_CHANGE)
        click.echo(f"{files(result.checked)} already formatted.")
        return
    write_formatted(result)
    for display in result.changed:
        click.echo(f"reformatted {display}")
    click.echo(f"{len(result.changed)} of {files(result.checked)} reformatted.")


def files(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"
