"""The `trainform` command line: parse flags, call one library function, pick a renderer.

Exit codes: 0 success, 1 error (invalid specs, bad usage), 2 changes or drift present
(with --detailed-exitcode), 3 blocked by policy. No traceback reaches a user; set
TRAINFORM_DEBUG=1 to see one for an internal error. A write the system refuses for lack of
room (a full disk, a quota) is an error naming what could not be written, not an internal
one: the files the CLI writes go through specs.file_writes, which leaves no temporary file.
"""

from __future__ import annotations

import errno
import json
import os
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
    text_budget_option,
)
from trainform.cli.output import load_or_exit
from trainform.cli.render.diagnostics import render_diagnostics_json, render_diagnostics_text
from trainform.cli.render.style import use_color
from trainform.cli.render.words import plural
from trainform.planner.errors import PlannerError
from trainform.planner.signals import exit_code_for, release_held
from trainform.planner.signals import install as install_signal_handlers
from trainform.providers.errors import ProviderError
from trainform.specs import Diagnostic, Severity, SpecError, SpecSet, SpecUsageError, load_specs
from trainform.specs.diagnostic_budget import cap_per_run
from trainform.specs.environments import environments_sharing_data

EXIT_OK, EXIT_ERROR = 0, 1


def _load(
    spec_dir: str, inputs: TemplateInputs, output_format: str, max_chars: int | None = None
) -> SpecSet:
    from trainform.planner.variables import check_variables

    specs = load_or_exit(
        lambda: load_specs(
            spec_dir,
            environment=inputs.environment,
            variables=inputs.variables,
            var_files=inputs.var_files,
        ),
        output_format,
        max_chars,
    )
    check_variables(specs, inputs.variables)
    return specs


class LazyGroup(click.Group):
    """A group whose heavier commands are imported only when they run (keeps `validate`
    start-up to the spec language)."""

    lazy: dict[str, str] = {
        "plan": "trainform.cli.engine:plan",
        "apply": "trainform.cli.engine:apply",
        "destroy": "trainform.cli.engine:destroy",
        "show": "trainform.cli.engine:show",
        "plan-diff": "trainform.cli.replanning:plan_diff",
        "plan-overlap": "trainform.cli.replanning:plan_overlap",
        "drift": "trainform.cli.drift:drift",
        "drill": "trainform.cli.drill:drill",
        "state": "trainform.cli.state:state",
        "force-unlock": "trainform.cli.state:force_unlock",
        "import": "trainform.cli.state:import_command",
        "lock": "trainform.cli.jobs:lock",
        "status": "trainform.cli.jobs:status",
        "logs": "trainform.cli.runs:logs",
        "lineage": "trainform.cli.runs:lineage",
        "usage": "trainform.cli.runs:usage",
        "review": "trainform.cli.review:review",
        "init": "trainform.cli.project:init",
        "fmt": "trainform.cli.project:fmt",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        import importlib

        module, _, attribute = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="trainform", prog_name="trainform")
def cli() -> None:
    """Declarative plan/apply/drift for GPU training platforms."""


def _tenancy(specs: SpecSet, policies_path: Path | None) -> list[Diagnostic]:
    """project-isolation's findings as diagnostics, policies from the trusted place."""
    from trainform.policies.engine import tenancy_diagnostics
    from trainform.policies.trusted import PolicyConfigError, load_trusted

    try:
        trusted = load_trusted(policies_path, specs.config, specs.root)
    except PolicyConfigError as exc:
        raise click.ClickException(str(exc)) from None
    return tenancy_diagnostics(specs, trusted)


def _shared_writes(specs: SpecSet, inputs: TemplateInputs) -> list[Diagnostic]:
    """Locations on data services shared with another environment that it writes otherwise;
    the specs load again (per other environment) only when a data service is shared."""
    if not environments_sharing_data(specs.base_config or specs.config, specs.environment):
        return []
    from trainform.planner.shared_writes import shared_write_diagnostics

    return shared_write_diagnostics(specs, inputs.variables, inputs.var_files)


@cli.command()
@spec_dir_argument
@template_options
@policies_option
@format_option("text", "json")
@text_budget_option
@no_color_option
def validate(
    spec_dir: str,
    inputs: TemplateInputs,
    policies_path: Path | None,
    output_format: str,
    max_chars: int | None,
) -> None:
    """Check that the specs in SPEC_DIR are well formed, every reference resolves, every
    document comes from where tenancy (project-isolation) allows it, and no two environments
    write one place on a data service they share with different specs."""
    specs = _load(spec_dir, inputs, output_format, max_chars)
    diagnostics = cap_per_run(
        [*specs.warnings, *_tenancy(specs, policies_path), *_shared_writes(specs, inputs)]
    )
    failed = any(d.severity is Severity.ERROR for d in diagnostics)
    extra = {"resourceCount": len(specs.resources), "fileCount": len(specs.files)}
    if output_format == "json":
        click.echo(render_diagnostics_json(diagnostics, extra), nl=False)
        if failed:
            raise SystemExit(EXIT_ERROR)
        return
    if failed:
        files = len({d.location.file for d in diagnostics if d.location})
        text = render_diagnostics_text(diagnostics, files, use_color(), max_chars)
        click.echo(text, nl=False, color=use_color())
        raise SystemExit(EXIT_ERROR)
    if diagnostics:
        text = render_diagnostics_text(diagnostics, None, use_color(), max_chars)
        click.echo(text, color=use_color())
    click.echo(
        f"Success: {plural(len(specs.resources), 'resource')} in "
        f"{plural(len(specs.files), 'file')} {'is' if len(specs.resources) == 1 else 'are'} valid"
        + (f" (environment {specs.environment})." if specs.environment else ".")
    )


@cli.command()
@spec_dir_argument
@template_options
@format_option("text", "dot", "mermaid", "json")
def graph(
    spec_dir: str,
    inputs: TemplateInputs,
    output_format: str,
) -> None:
    """Show what depends on what, in creation order (text, dot, mermaid or json)."""
    from trainform.cli.render.graph import GRAPH_RENDERERS
    from trainform.planner.graph import build_graph

    diagnostics_format = "json" if output_format == "json" else "text"
    specs = _load(spec_dir, inputs, diagnostics_format)
    click.echo(GRAPH_RENDERERS[output_format](build_graph(specs)), nl=False)


@cli.command()
@click.argument("kind", required=False)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file.")
def schema(kind: str | None, output: str | None) -> None:
    """Print the JSON Schema of spec documents (or of one KIND, or Config) for editors."""
    from trainform.specs.schema import document_schema

    text = json.dumps(document_schema(kind), indent=2) + "\n"
    if output:
        from trainform.specs.file_writes import write_file

        write_file(output, text)
    else:
        click.echo(text, nl=False)


@cli.command()
@click.argument("target", metavar="KIND[.FIELD]")
@format_option("text", "json")
def explain(target: str, output_format: str) -> None:
    """Document a kind or a field, e.g. `Queue.spec.pools.nominalQuota`."""
    from dataclasses import asdict

    from trainform.specs.schema import explain as explain_target

    result = explain_target(target)
    if output_format == "json":
        click.echo(json.dumps(asdict(result), indent=2))
        return
    lines = [f"{result.path} ({result.type})"]
    if result.required:
        lines.append("required")
    elif result.default:
        lines.append(f"default: {result.default}")
    if result.description:
        lines += ["", result.description]
    if result.fields:
        lines += ["", "fields:"]
        for doc in result.fields:
            flag = " (required)" if doc.required else ""
            lines.append(f"  {doc.name}: {doc.type}{flag}")
            if doc.description:
                lines.append(f"      {doc.description}")
    click.echo("\n".join(lines))


def run(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code. Every expected failure becomes a message."""
    install_signal_handlers()
    try:
        cli.main(args=argv, prog_name="trainform", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_ERROR
    except click.ClickException as exc:
        exc.show()
        return EXIT_ERROR
    except (SpecUsageError, SpecError, PlannerError, ProviderError) as exc:
        from trainform.specs.secrets import redact  # errors may carry a server's words

        click.echo(redact(f"error: {exc}"), err=True)
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        click.echo(f"Interrupted{f' by {exc}' if str(exc) else ''}.", err=True)
        return exit_code_for(exc)
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if full_disk(exc):
            click.echo(f"error: {write_failure(exc)}", err=True)
            return EXIT_ERROR
        if os.environ.get("TRAINFORM_DEBUG"):
            import traceback

            traceback.print_exc()
        from trainform.specs.secrets import redact

        click.echo(
            redact(f"internal error: {type(exc).__name__}: {exc}\n")
            + "This is a bug in trainform; rerun with TRAINFORM_DEBUG=1 and report it.",
            err=True,
        )
        return EXIT_ERROR
    finally:
        release_held()  # a lock still taken on a way out nobody foresaw
    return EXIT_OK


def main(argv: list[str] | None = None) -> None:
    """Console entry point. Exits without tearing down the interpreter: every file and
    connection is closed by the command itself, and freeing a large platform object by
    object at exit would cost a third of a short command's time."""
    code = run(argv)
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        code = code or EXIT_ERROR
        if isinstance(exc, OSError) and full_disk(exc):
            _say(f"error: {write_failure(exc)}\n")
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        code = code or EXIT_ERROR
    os._exit(code)


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def full_disk(exc: BaseException) -> bool:
    """Whether `exc` is a write the system refused for lack of room (disk, quota, size)."""
    return isinstance(exc, OSError) and exc.errno in _FULL


def write_failure(exc: OSError) -> str:
    """`cannot write PATH: No space left on device`; the output when it names no file
    (stdout redirected to a full disk)."""
    where = os.fsdecode(exc.filename) if exc.filename is not None else "the output"
    return f"cannot write {where}: {exc.strerror or exc}"


def _say(text: str) -> None:
    """`text` on stderr, unbuffered (stdout may be what failed)."""
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:
        pass


if __name__ == "__main__":
    main()
