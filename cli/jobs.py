"""CLI commands for training jobs and pins: lock, status."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click
from trainform.cli.options import (
    TemplateInputs,
    format_option,
    spec_dir_argument,
    template_options,
)
from trainform.cli.output import open_or_exit
from trainform.cli.render.platform_text import render_platform_text
from trainform.cli.render.status_table import render_releases_table, render_status_table
from trainform.cli.render.status_text import render_status_json, render_status_text
from trainform.cli.render.style import use_color
from trainform.cli.render.words import plural
from trainform.planner.desired import build_desired
from trainform.planner.lockfile import LOCK_FILE, resolve_pins
from trainform.planner.platform_view import platform_view
from trainform.planner.release_lineage import release_summaries
from trainform.planner.status import JobReport, job_status, matching_jobs
from trainform.planner.workspace import Workspace
from trainform.specs.file_writes import write_file
from trainform.specs.secrets import redact


@click.command()
@spec_dir_argument
@template_options
def lock(spec_dir: str, inputs: TemplateInputs) -> None:
    """Resolve image digests, dataset manifest digests and code identities (a code folder's
    content digest, an external repository's commit) into trainform.lock."""
    workspace = open_or_exit(spec_dir, inputs, "text")
    try:
        pins = resolve_pins(build_desired(workspace.specs), workspace.providers, workspace.root)
    finally:
        workspace.providers.close()
    path = workspace.root / LOCK_FILE
    previous = path.read_text(encoding="utf-8") if path.exists() else None
    text = pins.dumps()
    if previous == text:
        click.echo(f"{LOCK_FILE} is up to date.")
        return
    write_file(path, text)
    click.echo(
        f"Wrote {path}: {plural(len(pins.images), 'image')}, "
        f"{plural(len(pins.datasets), 'dataset version')}, "
        f"{plural(len(pins.code), 'code location')}. Commit it."
    )


def _short_address(workspace: Workspace, address: str) -> str:
    jobs = [a for a, d in build_desired(workspace.specs).items() if d.kind == "TrainingJob"]
    matches = matching_jobs(jobs, address)
    return matches[0] if len(matches) == 1 else address


def _tick(workspace) -> None:  # type: ignore[no-untyped-def]
    for instance in workspace.config.providers:
        provider = workspace.providers.get(instance.name)
        tick = getattr(provider, "tick", None)
        if callable(tick):
            tick()


def _selected(reports: list[JobReport], projects: tuple[str, ...], phases: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """The reports of the --project and --phase filters (each repeatable, any of them)."""
    if projects:
        reports = [r for r in reports if r.address.split("/")[1] in projects]
    if phases:
        reports = [r for r in reports if r.phase in phases]
    return reports


def _render(
    reports: list[JobReport], output_format: str, describe: bool, releases: list[dict[str, Any]]
) -> None:
    if output_format == "json":
        click.echo(render_status_json(reports, releases), nl=False)
    elif describe:
        click.echo(render_status_text(reports, use_color()), nl=False, color=use_color())
    else:
        table = render_status_table(reports, use_color()) + render_releases_table(releases)
        click.echo(table, nl=False, color=use_color())


def _platform(workspace: Workspace, output_format: str) -> None:
    try:
        view = platform_view(workspace)
    finally:
        workspace.providers.close()
    if output_format == "json":
        click.echo(redact(json.dumps(view.to_json(), indent=2, sort_keys=True)))
    else:
        click.echo(redact(render_platform_text(view)), nl=False)


def _watch(workspace: Workspace, address: str | None, wait: bool, timeout: float, text: bool):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        if wait:
            _tick(workspace)
        reports = job_status(workspace, address)
        if not wait or all(r.settled for r in reports):
            return reports
        if time.monotonic() > deadline:
            click.echo(f"Timed out after {timeout:g}s waiting for jobs.", err=True)
            click.echo(render_status_table(reports, use_color()), color=use_color())
            sys.exit(1)
        if text:
            busy = ", ".join(
                f"{r.address} {r.phase}"
                + (f" step {r.current_step}" if r.current_step is not None else "")
                for r in reports
                if not r.settled
            )
            click.echo(f"waiting: {busy}")
        time.sleep(1.0)


@click.command()
@click.argument("addresses", nargs=-1, metavar="[ADDRESS]...")
@click.option(
    "--dir", "spec_dir", default=".", type=click.Path(file_okay=False), help="Spec folder."
)
@template_options
@click.option("--wait", is_flag=True, help="Wait until no run or evaluation is queued or running.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds --wait waits at most.")
@click.option(
    "--platform",
    "show_platform",
    is_flag=True,
    help="Per pool and queue: capacity, nominal, in use, borrowed, running and waiting jobs.",
)
@click.option("--project", "projects", multiple=True, help="Only this project's jobs (repeatable).")
@click.option("--phase", "phases", multiple=True, help="Only jobs in this phase (repeatable).")
@click.option(
    "-v", "--describe", "describe", is_flag=True,
    help="Each job in full: attempts and their timelines, checkpoints, evaluations, gates.",
)  # fmt: skip
@format_option("text", "json")
def status(
    addresses: tuple[str, ...],
    spec_dir: str,
    inputs: TemplateInputs,
    wait: bool,
    timeout: float,
    show_platform: bool,
    projects: tuple[str, ...],
    phases: tuple[str, ...],
    describe: bool,
    output_format: str,
) -> None:
    """Show the training jobs as a table: phase, step of the total, ETA, queue, time waited
    and attempts; -v describes each in full (attempts' timelines, checkpoints, evaluations).

    ADDRESS... narrows it to those jobs (a short name is enough when it is unambiguous); a
    spec folder given there instead (like the other commands take it) is read as --dir."""
    wanted = list(addresses)
    if wanted and spec_dir == "." and (Path(wanted[0]) / "trainform.yaml").is_file():
        spec_dir = wanted.pop(0)
    workspace = open_or_exit(spec_dir, inputs, output_format)
    if show_platform:
        _platform(workspace, output_format)
        return
    chosen = [_short_address(workspace, a) for a in wanted]
    try:
        single = chosen[0] if len(chosen) == 1 else None
        reports = _watch(workspace, single, wait, timeout, output_format == "text")
        releases = [] if chosen else release_summaries(workspace.backend.read())
    finally:
        workspace.providers.close()
    missing = [a for a in chosen if a not in {r.address for r in reports}]
    if missing:
        click.echo(f"error: no TrainingJob {', '.join(missing)} in the specs", err=True)
        sys.exit(1)
    if chosen:
        reports = [r for r in reports if r.address in chosen]
    _render(_selected(reports, projects, phases), output_format, describe, releases)
