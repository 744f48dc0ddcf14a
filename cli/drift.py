"""The drift command: run a drift check (or list past runs) and pick a renderer.

Exit 0 when nothing open drifted (acknowledged findings do not count), 2 when something
did, 1 on error. `--out FILE` writes the report to FILE and prints the summary line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from trainform.cli.options import (
    TemplateInputs,
    format_option,
    no_color_option,
    policies_option,
    spec_dir_argument,
    template_options,
    timeout_option,
)
from trainform.cli.output import open_or_exit
from trainform.cli.render.drift_report import render_drift_html, render_drift_markdown
from trainform.cli.render.drift_text import render_drift_json, render_drift_text
from trainform.cli.render.drift_view import headline
from trainform.cli.render.style import use_color
from trainform.planner.drift_history import HISTORY_FORMAT_VERSION, summarize_runs
from trainform.planner.drift_model import DriftReport
from trainform.planner.drift_run import check_drift
from trainform.specs.errors import FileWriteError
from trainform.specs.file_writes import write_file

EXIT_DRIFTED = 2


def _rendered(report: DriftReport, output_format: str, color: bool) -> str:
    if output_format == "json":
        return render_drift_json(report)
    if output_format == "markdown":
        return render_drift_markdown(report)
    if output_format == "html":
        return render_drift_html(report)
    return render_drift_text(report, color)


def _write(path: Path, text: str) -> None:
    """The report written whole or not at all (specs.file_writes), nothing left behind."""
    try:
        write_file(path, text)
    except FileWriteError as exc:
        raise click.ClickException(
            f"cannot write the drift report to {path}: {exc.reason}"
        ) from None


def _history(spec_dir: str, inputs: TemplateInputs, output_format: str) -> None:
    workspace = open_or_exit(spec_dir, inputs, output_format)
    try:
        runs = workspace.backend.drift_runs()
        summaries = summarize_runs(runs.read())
    finally:
        workspace.providers.close()
    if output_format == "json":
        document = {
            "formatVersion": HISTORY_FORMAT_VERSION,
            "runs": [s.to_json() for s in summaries],
        }
        click.echo(json.dumps(document, indent=2))
        return
    if not summaries:
        click.echo(f"No drift runs recorded yet in {runs.location}.")
        return
    click.echo(
        f"{'checked at':<21} {'serial':>6} {'checked':>7} {'open':>5} {'new':>4} "
        f"{'resolved':>8} {'acknowledged':>12}"
    )
    for s in summaries:
        click.echo(
            f"{s.checked_at:<21} {s.serial:>6} {s.checked:>7} {s.open:>5} {s.new:>4} "
            f"{s.resolved:>8} {s.acknowledged:>12}"
        )


@click.command()
@spec_dir_argument
@template_options
@format_option("text", "json", "markdown", "html")
@no_color_option
@timeout_option
@policies_option
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the report to FILE (e.g. report.html) and print only the summary line.",
)
@click.option(
    "--history", "list_history", is_flag=True, help="List the recorded drift runs and exit."
)
@click.option(
    "--no-record",
    "no_record",
    is_flag=True,
    help="Only read: do not append this run to the drift history (also the case, with a "
    "notice, when the history is not writable).",
)
def drift(
    spec_dir: str,
    inputs: TemplateInputs,
    output_format: str,
    policies_path: Path | None,
    out: Path | None,
    list_history: bool,
    no_record: bool,
) -> None:
    """Report what changed outside trainform: modified, missing, orphaned, data mutated,
    failed jobs, broken checkpoints and evaluations, each with its evidence and remedy.

    Every run is appended to a bounded history beside the state (see --history); findings
    covered by acknowledgements.yaml in the trusted policies folder are shown but do not
    count. Exit 0 when nothing open drifted, 2 when something did, 1 on error.
    """
    if list_history:
        _history(spec_dir, inputs, output_format)
        return
    if out is not None and not out.absolute().parent.is_dir():
        raise click.BadParameter(f"{out.parent} is not a folder", param_hint="--out")
    workspace = open_or_exit(spec_dir, inputs, output_format)
    try:
        report = check_drift(workspace, policies_path, record=not no_record)
    finally:
        workspace.providers.close()
    if report.not_recorded:
        click.echo(f"Note: this run was not recorded: {report.not_recorded}.", err=True)
    if out is not None:
        _write(out, _rendered(report, output_format, False))
        click.echo(f"{headline(report)} Wrote the {output_format} report to {out}.")
    else:
        color = output_format == "text" and use_color()
        click.echo(_rendered(report, output_format, color), nl=False, color=color)
    if report.drifted:
        sys.exit(EXIT_DRIFTED)
