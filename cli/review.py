"""`trainform review`: the impact of a change to queue policy between two Git refs.

Policies, tenancy settings and CODEOWNERS come from `--policies PATH` or, without it, from
the base ref (its trainform.yaml `policies:` section and its CODEOWNERS), never from the
head: a pull request that edits its own policies does not change its verdict.

Parses flags, calls policies.review.make_review, picks a renderer. Exit codes: 0 review
produced, 3 the head has a deny finding that is not waived, 1 error (bad ref, invalid
specs at either side with file:line, unreadable trace).
"""

from __future__ import annotations

from pathlib import Path

import click
from trainform.cli.options import (
    TemplateInputs,
    format_option,
    policies_option,
    spec_dir_argument,
    template_options,
)
from trainform.cli.output import print_diagnostics
from trainform.cli.render.diagnostics import render_diagnostics_text
from trainform.cli.render.plan_markdown import DEFAULT_BUDGET

EXIT_ERROR, EXIT_DENIED = 1, 3


@click.command()
@spec_dir_argument
@click.option("--base", "base", required=True, metavar="REF", help="Git ref before the change.")
@click.option(
    "--head",
    "head",
    default=None,
    metavar="REF",
    help="Git ref after the change. Default: the working tree, uncommitted edits included.",
)
@policies_option
@click.option(
    "--trace",
    "trace",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Job trace to simulate under both sides (CSV or JSONL).",
)
@click.option(
    "--trace-from",
    "trace_from",
    default=None,
    metavar="slurm[:INSTANCE]",
    help="Read the trace from provider accounting instead: sacct of the slurm provider "
    "instance of trainform.yaml (name it when there are several).",
)
@click.option(
    "--since",
    "since",
    default="now-14days",
    show_default=True,
    help="Start of the accounting window (--trace-from): now-<N>days|hours, YYYY-MM-DD[THH:MM].",
)
@click.option(
    "--until",
    "until",
    default="now",
    show_default=True,
    help="End of the accounting window (--trace-from).",
)
@click.option(
    "--map-queue",
    "queue_map",
    multiple=True,
    metavar="TRACE=SPEC",
    help="Simulate the trace's queue TRACE as the specs' queue SPEC (repeatable). A trace "
    "naming a queue that neither side declares is an error otherwise.",
)
@click.option(
    "--map-project",
    "project_map",
    multiple=True,
    metavar="TRACE=SPEC",
    help="Simulate the trace's project TRACE as the specs' project SPEC (repeatable).",
)
@template_options
@format_option("text", "json", "markdown")
def review(
    spec_dir: str,
    base: str,
    head: str | None,
    policies_path: Path | None,
    trace: Path | None,
    trace_from: str | None,
    since: str,
    until: str,
    queue_map: tuple[str, ...],
    project_map: tuple[str, ...],
    inputs: TemplateInputs,
    output_format: str,
) -> None:
    """Review a change to queue policy: semantic diff, capacity, findings, simulated waits."""
    from trainform.policies.review import (
        MARKER,
        RefLoadError,
        ReviewError,
        ReviewRequest,
        make_review,
        render_review_json,
        render_review_markdown,
        render_review_text,
    )

    if trace is not None and trace_from is not None:
        raise click.UsageError("give either --trace or --trace-from, not both")
    request = ReviewRequest(
        spec_dir=spec_dir,
        base=base,
        head=head,
        environment=inputs.environment,
        variables=inputs.variables,
        var_files=inputs.var_files,
        policies=policies_path,
        trace=trace,
        trace_from=trace_from,
        since=since,
        until=until,
        queue_map=queue_map,
        project_map=project_map,
    )
    try:
        report = make_review(request)
    except RefLoadError as error:
        summary = f"cannot review: the {error.side} specs ({error.ref}) are invalid"
        click.echo(f"error: {summary}", err=True)
        if output_format == "markdown":
            # For the pull-request comment: the diagnostics, fenced, under a heading.
            files = len({d.location.file for d in error.error.diagnostics if d.location})
            head = f"{MARKER}\n### trainform review: ERROR\n\n{summary}:\n\n```text\n"
            room = DEFAULT_BUDGET - len(head) - len("```")  # a pull-request comment
            text = render_diagnostics_text(error.error.diagnostics, files, False, room)
            click.echo(f"{head}{text}```")
        else:
            print_diagnostics(error.error, output_format)
        raise SystemExit(EXIT_ERROR) from None
    except ReviewError as error:
        click.echo(f"error: {error}", err=True)
        if output_format == "markdown":
            # The pull-request comment says why there is no review, in place of one.
            click.echo(f"{MARKER}\n### trainform review: ERROR\n\n```text\n{error}\n```")
        raise SystemExit(EXIT_ERROR) from None
    renderers = {
        "text": render_review_text,
        "json": render_review_json,
        "markdown": render_review_markdown,
    }
    click.echo(renderers[output_format](report), nl=False)
    if report.denied:
        raise SystemExit(EXIT_DENIED)
