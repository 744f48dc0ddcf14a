"""CLI commands that read runs: logs, lineage, usage.

All three only read: the providers' own records (logs, accounting, runs) and state.
Output is redacted (`specs.secrets.redact`): a log or a provider's reason may carry a
credential.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from typing import Any

import click
from trainform.cli.options import TemplateInputs, format_option, template_options
from trainform.cli.output import open_or_exit
from trainform.cli.render.status_text import clock
from trainform.cli.render.words import plural
from trainform.planner.desired import build_desired
from trainform.planner.lineage import Lineage, LineageError, find_lineage
from trainform.planner.release_lineage import ReleaseLineage, release_lineage
from trainform.planner.state import State
from trainform.planner.status import matching_jobs, observe_jobs, read_log_now
from trainform.planner.usage import UsageReport, usage_report
from trainform.planner.workspace import Workspace
from trainform.providers.errors import ProviderError
from trainform.specs import Duration
from trainform.specs.secrets import redact

FOLLOW_POLL_SECONDS = 1.0

dir_option = click.option(
    "--dir", "spec_dir", default=".", type=click.Path(file_okay=False), help="Spec folder."
)


def _fail(message: str) -> None:
    click.echo(f"error: {redact(message)}", err=True)
    sys.exit(1)


def _job_address(workspace: Workspace, target: str) -> str:
    """A TrainingJob address from an address or an unambiguous short name."""
    desired = build_desired(workspace.specs)
    matches = matching_jobs([a for a, d in desired.items() if d.kind == "TrainingJob"], target)
    if len(matches) == 1:
        return matches[0]
    if matches:
        _fail(f"{target} is ambiguous: {', '.join(matches)}; give the whole address")
    _fail(f"no TrainingJob {target} in the specs")
    raise AssertionError


@click.command()
@click.argument("address")
@dir_option
@template_options
@click.option("--attempt", type=click.IntRange(min=1), help="Attempt number (default: latest).")
@click.option("--run", "run_id", help="Run id (default: the job's current run).")
@click.option("--eval", "suite", help="The log of this evaluation suite's run instead.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the attempt ends.")
@click.option("--tail", type=click.IntRange(min=0), help="Only the last N lines.")
def logs(
    address: str,
    spec_dir: str,
    inputs: TemplateInputs,
    attempt: int | None,
    run_id: str | None,
    suite: str | None,
    follow: bool,
    tail: int | None,
) -> None:
    """Print a training attempt's log (local files, Slurm output, Kubernetes pod logs)."""
    workspace = open_or_exit(spec_dir, inputs, "text")
    try:
        _print_log(workspace, address, attempt, run_id, suite, follow, tail)
    finally:
        workspace.providers.close()


def _print_log(
    workspace: Workspace,
    target: str,
    attempt: int | None,
    run_id: str | None,
    suite: str | None,
    follow: bool,
    tail: int | None,
) -> None:
    address = _job_address(workspace, target)
    desired = build_desired(workspace.specs)
    job = desired[address]
    provider = workspace.providers.get(job.providers[0])
    reader = getattr(provider, "read_log", None)
    if reader is None:
        _fail(f"provider {job.providers[0]} keeps no logs of jobs")
    runs = observe_jobs(workspace, [job]).get(address, [])
    state = workspace.backend.read() or State.new()
    recorded = state.resources.get(address)
    current = None
    if recorded is not None:
        current = recorded.outputs.get(job.providers[0], {}).get("runId")
    chosen = run_id or current or (runs[-1]["run_id"] if runs else None)
    run = next((r for r in runs if r["run_id"] == chosen), None)
    if run is None:
        _fail(f"{address} has no run {chosen or ''} the provider knows".replace("  ", " "))
    suite_address = None
    if suite is not None:
        tried = [
            e for e in run["evaluations"] if e["suite"].endswith("/" + suite) or e["suite"] == suite
        ]
        if not tried:
            _fail(f"run {chosen} has no evaluation by {suite}")
        suite_address = tried[-1]["suite"]
        number = attempt or len(tried)
    else:
        numbers = [a["attempt"] for a in run["attempts"]]
        if not numbers:
            _fail(f"run {chosen} has no attempt yet")
        number = attempt or numbers[-1]
        if number not in numbers:
            _fail(f"run {chosen} has attempts {', '.join(map(str, numbers))}, not {number}")
    try:
        offset = 0
        if tail is not None:
            text, offset, complete = read_log_now(reader, address, chosen, number, suite_address)
            kept = text.splitlines(keepends=True)[-tail:] if tail else []
            click.echo(redact("".join(kept)), nl=False)
            if complete or not follow:
                return
        while True:
            chunk = reader(address, chosen, number, offset, suite_address)
            if chunk.text:
                click.echo(redact(chunk.text), nl=False)
            advanced = chunk.next_offset != offset
            offset = chunk.next_offset
            if chunk.complete or (not follow and not advanced):
                return
            if not advanced:
                time.sleep(FOLLOW_POLL_SECONDS)
    except ProviderError as exc:
        _fail(f"cannot read the log of {address} attempt {number}: {exc}")


@click.command()
@click.argument("target")
@dir_option
@template_options
@click.option("--run", "run_id", help="Run id (default: the job's current run).")
@format_option("text", "json")
def lineage(
    target: str, spec_dir: str, inputs: TemplateInputs, run_id: str | None, output_format: str
) -> None:
    """Where a run came from: image, data, code, parameters, parent run, evaluations.

    TARGET is a TrainingJob address (or short name), a checkpoint path or URI, a model
    (output) folder, or a released artifact: a registry reference or digest, or the
    object-store URI of a ModelRelease (docs/releases.md)."""
    workspace = open_or_exit(spec_dir, inputs, output_format)
    release = None
    try:
        release = release_lineage(workspace, target)
        found = release.run if release else find_lineage(workspace, target, run_id)
    except LineageError as exc:
        _fail(str(exc))
    finally:
        workspace.providers.close()
    if output_format == "json":
        document = {"formatVersion": 1, "lineage": found.to_json()}
        if release is not None:
            document["release"] = release.to_json()
        click.echo(redact(json.dumps(document, indent=2, sort_keys=True)))
    else:
        text = render_release_text(release) if release is not None else ""
        indent = "    " if release is not None else ""
        click.echo(redact(text + render_lineage_text(found, indent)), nl=False)


def render_release_text(release: ReleaseLineage) -> str:
    data = release.to_json()
    lines = [f"{data['address']} version {data['version']}: artifact {data['digest']}"]
    if data["registry"]:
        lines.append(f"  registry:    {data['registry']['reference']}")
    if data["objectStore"]:
        lines.append(f"  objectStore: {data['objectStore']['uri']}")
    source = data["source"]
    what = f"checkpoint {source['checkpoint']}" if source.get("checkpoint") else "final output"
    lines.append(f"  released:    {what} of {data['job']} run {data['runId']}")
    for file in data["files"]:
        lines.append(f"  file:        {file['path']} ({file['size']} bytes) {file['digest']}")
    for evaluation in data["evaluations"]:
        read = ", ".join(
            f"{d['dataset']} {d['manifestDigest']}" for d in evaluation.get("datasets", [])
        )
        lines.append(f"  evaluation:  {evaluation['suite']}: {evaluation['verdict']} on {read}")
        lines += [f"    gate:      {gate['text']}" for gate in evaluation.get("gates", [])]
    lines.append("  run:")
    return "\n".join(lines) + "\n"


def binary_size(value: Any) -> Any:
    """Bytes as a person reads them, exactly (`536870912` -> `512Mi`); else unchanged."""
    text = str(value)
    if not text.isdigit() or int(text) == 0:
        return value
    amount, unit = int(text), ""
    for suffix in ("Ki", "Mi", "Gi", "Ti"):
        if amount % 1024:
            break
        amount, unit = amount // 1024, suffix
    return f"{amount}{unit}"


def render_lineage_text(found: Lineage, indent: str = "") -> str:
    data = found.to_json()
    lines = [
        f"{indent}{data['address']} run {data['runId']}"
        + ("" if data["current"] else " (earlier run)")
        + f": {data['phase']}, {plural(data['attempts'], 'attempt')}"
    ]
    pad = indent + "  "
    image = data.get("image") or {}
    if image:
        lines.append(
            f"{pad}image:       {image.get('image') or '-'} {image.get('digest') or ''}".rstrip()
        )
    for dataset in data["datasets"]:
        lines.append(f"{pad}dataset:     {dataset['dataset']} {dataset.get('manifestDigest', '')}")
    code = data.get("code")
    if code:
        identity = ", ".join(f"{k}={v}" for k, v in sorted(code.items()) if k != "location")
        lines.append(f"{pad}code:        {code.get('location')} ({identity or 'unpinned'})")
    if data.get("command"):
        lines.append(f"{pad}command:     {' '.join(map(str, data['command']))}")
    for name, value in sorted((data.get("parameters") or {}).items()):
        lines.append(f"{pad}parameter:   {name} = {json.dumps(value)}")
    if data.get("resources"):
        shown = {k: binary_size(v) if k == "memory" else v for k, v in data["resources"].items()}
        lines.append(f"{pad}resources:   {json.dumps(shown, sort_keys=True)}")
    lines.append(f"{pad}spec commit: {data.get('specCommit') or 'not recorded'}")
    lines.append(f"{pad}lock digest: {data.get('lockDigest') or 'none'}")
    if data.get("environment"):
        lines.append(f"{pad}environment: {data['environment']}")
    if data.get("outputDir"):
        lines.append(f"{pad}model:       {data['outputDir']}")
    for checkpoint in data["checkpoints"]:
        state = "valid" if checkpoint["valid"] else "invalid"
        lines.append(f"{pad}checkpoint:  {checkpoint['id']} (step {checkpoint['step']}, {state})")
    for evaluation in data["evaluations"]:
        metrics = ", ".join(f"{k}={v:g}" for k, v in sorted(evaluation["metrics"].items()))
        gate = evaluation.get("gate")
        lines.append(
            f"{pad}evaluation:  {evaluation['suite']}: {evaluation['phase']}"
            + (f" ({metrics})" if metrics else "")
            + (f", gate {gate}" if gate else "")
        )
    init = data.get("initFrom")
    if init:
        lines.append(
            f"{pad}initFrom:    {init['job']} checkpoint {init.get('checkpoint')}"
            + (f" of run {init['runId']}" if init.get("runId") else "")
        )
    text = "\n".join(lines) + "\n"
    if found.parent is not None:
        text += render_lineage_text(found.parent, pad + "  ")
    return text


@click.command()
@dir_option
@template_options
@click.option("--since", default="7d", show_default=True, help="Window ending now, e.g. 24h, 30d.")
@click.option(
    "--by",
    type=click.Choice(["project", "queue", "pool"]),
    default="project",
    show_default=True,
    help="Group rows by.",
)
@format_option("text", "csv", "json", "markdown")
def usage(spec_dir: str, inputs: TemplateInputs, since: str, by: str, output_format: str) -> None:
    """Accelerator-hours, CPU-hours, wait and lost (re-run) hours from provider accounting."""
    try:
        window = Duration(since).seconds
    except ValueError as exc:
        _fail(f"--since {since!r} is not a duration (like 90m, 24h, 30d): {exc}")
    workspace = open_or_exit(spec_dir, inputs, output_format)
    try:
        report = usage_report(workspace, window, by)
    finally:
        workspace.providers.close()
    click.echo(redact(render_usage(report, output_format)), nl=False)
    for problem in report.problems:
        click.echo(f"warning: cannot read accounting of {redact(problem)}", err=True)


_COLUMNS = (
    ("runs", "runs"),
    ("attempts", "attempts"),
    ("acceleratorHours", "accel-h"),
    ("cpuHours", "cpu-h"),
    ("waitHours", "wait-h"),
    ("lostHours", "lost-h"),
    ("lostAcceleratorHours", "lost-accel-h"),
)


def _cell(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def render_usage(report: UsageReport, output_format: str) -> str:
    data = report.to_json()
    if output_format == "json":
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    rows = data["rows"]
    if output_format == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([report.by] + [key for key, _ in _COLUMNS])
        for row in rows:
            writer.writerow([row["group"]] + [row[key] for key, _ in _COLUMNS])
        return out.getvalue()
    headers = [report.by] + [title for _, title in _COLUMNS]
    table = [[row["group"]] + [_cell(row[key]) for key, _ in _COLUMNS] for row in rows]
    title = f"Usage from {clock(report.since)} to {clock(report.until)} UTC, by {report.by}"
    if output_format == "markdown":
        lines = [f"**{title}**", "", "| " + " | ".join(headers) + " |"]
        lines.append("|" + "|".join(["---"] + ["---:"] * len(_COLUMNS)) + "|")
        lines += ["| " + " | ".join(cells) + " |" for cells in table]
        if not table:
            lines.append("| (no attempts in the window) |" + " |" * len(_COLUMNS))
        return "\n".join(lines) + "\n"
    if not table:
        return f"{title}\n  no training attempts ran or waited in the window\n"
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]
    lines = [title]
    lines.append(
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        )
    )
    for cells in table:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    lines.append(f"(sources: {', '.join(report.sources) or 'none'}; hours of training attempts)")
    lines += _drill_lines(report)
    return "\n".join(lines) + "\n"


def _drill_lines(report: UsageReport) -> list[str]:
    """The drills' share of the hours above, one line per drill run."""
    if not report.drills:
        return []
    accelerator = sum(d["acceleratorHours"] for d in report.drills)
    cpu = sum(d["cpuHours"] for d in report.drills)
    lines = [f"Drills (included above): {accelerator:.2f} accel-h, {cpu:.2f} cpu-h"]
    for drill in report.drills:
        lines.append(
            f"  {drill['address']} {drill['runId']} {drill['condition']}: "
            f"{drill['acceleratorHours']:.4f} accel-h, {drill['cpuHours']:.4f} cpu-h"
        )
    return lines
