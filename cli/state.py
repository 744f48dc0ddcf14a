"""CLI commands on state itself: state list/show/rm, force-unlock, import."""

from __future__ import annotations

import json

import click
from trainform.cli.options import TemplateInputs, env_option, spec_dir_argument, template_options
from trainform.cli.output import load_or_exit, open_or_exit
from trainform.cli.render.audit_text import render_audit_table
from trainform.cli.render.words import plural
from trainform.planner.audit import audit_record, matching, since
from trainform.planner.errors import PlannerError
from trainform.planner.importing import import_resource
from trainform.planner.state import State
from trainform.planner.workspace import Workspace, make_backend
from trainform.specs import load_specs


def _backend(spec_dir: str, environment: str | None):  # type: ignore[no-untyped-def]
    """The state backend of `environment` (else the default one) of the spec folder."""
    from pathlib import Path

    specs = load_or_exit(lambda: load_specs(spec_dir, environment=environment), "text")
    return make_backend(specs.config, Path(spec_dir), specs.environment)


def _read(spec_dir: str, environment: str | None) -> State:
    backend = _backend(spec_dir, environment)
    state = backend.read()
    if state is None:
        raise PlannerError(f"cannot read state: no state exists yet at {backend.location}")
    return state


@click.group()
def state() -> None:
    """Inspect or edit state (list, show, rm)."""


@state.command("list")
@spec_dir_argument
@env_option
def state_list(spec_dir: str, environment: str | None) -> None:
    """List the addresses in state."""
    current = _read(spec_dir, environment)
    for address in sorted(current.resources):
        pending = current.resources[address].pending
        click.echo(address + (f"  (pending {pending})" if pending else ""))


@state.command("show")
@click.argument("address")
@spec_dir_argument
@env_option
def state_show(address: str, spec_dir: str, environment: str | None) -> None:
    """Show one resource as recorded in state."""
    current = _read(spec_dir, environment)
    resource = current.resources.get(address)
    if resource is None:
        raise PlannerError(f"cannot show {address}: not in state")
    click.echo(json.dumps({"address": address, **resource.to_json()}, indent=2, sort_keys=True))


@state.command("rm")
@click.argument("addresses", nargs=-1, required=True)
@click.option("--dir", "spec_dir", default=".", type=click.Path(file_okay=False))
@env_option
def state_rm(addresses: tuple[str, ...], spec_dir: str, environment: str | None) -> None:
    """Forget resources without deleting them (they become orphaned on the provider)."""
    backend = _backend(spec_dir, environment)
    info = backend.lock("state rm")
    try:
        current = backend.read()
        missing = [a for a in addresses if current is None or a not in current.resources]
        if missing or current is None:
            raise PlannerError(f"cannot remove {', '.join(missing)}: not in state")
        for address in addresses:
            backend.record(current, {"type": "outcome", "address": address, "resource": None})
            click.echo(f"Removed {address} from state (the live object is untouched).")
        backend.compact(current)
    finally:
        backend.unlock(info)


def _local_backend(spec_dir: str, environment: str | None, verb: str):  # type: ignore[no-untyped-def]
    from trainform.planner.backends.local import LocalBackend

    backend = _backend(spec_dir, environment)
    if not isinstance(backend, LocalBackend):
        raise PlannerError(
            f"cannot {verb}: the {type(backend).__name__} keeps every version of the state "
            "object; restore one with your bucket's version history, then run "
            "`trainform state accept`"
        )
    return backend


@state.command("restore")
@click.argument("generation", type=click.IntRange(1, 1000))
@spec_dir_argument
@env_option
def state_restore(generation: int, spec_dir: str, environment: str | None) -> None:
    """Put backup generation N back as the state (the replaced file is kept beside it)."""
    backend = _local_backend(spec_dir, environment, f"restore backup {generation}")
    info = backend.lock("state restore")
    try:
        restored, kept = backend.restore(generation)
    finally:
        backend.unlock(info)
    click.echo(
        f"Restored backup {generation}: lineage {restored.lineage} serial {restored.serial}, "
        f"{plural(len(restored.resources), 'resource')}."
        + (f" The replaced state is kept as {kept}." if kept else "")
        + " Run `trainform plan` to see what differs from the platform."
    )


@state.command("accept")
@click.option("--reason", default="", help="Why the state was swapped (recorded).")
@spec_dir_argument
@env_option
def state_accept(reason: str, spec_dir: str, environment: str | None) -> None:
    """Accept the state found (another lineage, an older serial, or none) as the baseline."""
    backend = _backend(spec_dir, environment)
    info = backend.lock("state accept")
    try:
        identity = backend.accept(reason or "trainform state accept")
    finally:
        backend.unlock(info)
    click.echo(
        f"Accepted lineage {identity.lineage or '(none)'} serial {identity.serial} as this "
        "workspace's state; the swap is recorded in its identity history."
    )


def _iso_time(value: str | None) -> str | None:
    import re

    if value is None or re.fullmatch(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z?)?", value):
        return value
    raise click.BadParameter(f"{value!r} is not a UTC date (YYYY-MM-DD) or time (…THH:MM:SSZ)")


@state.command("audit")
@click.option(
    "--since",
    "start",
    default=None,
    metavar="DATE",
    callback=lambda _c, _p, value: _iso_time(value),
    help="Only records from this UTC date (2026-12-01) or time (2026-12-01T10:00:00Z).",
)
@click.option(
    "--verify",
    is_flag=True,
    help="Check the whole trail (hash chain, head, object versions); exit 1 if it was altered.",
)
@click.option(
    "--command",
    "commands",
    multiple=True,
    metavar="NAME",
    help="Only records of this command (apply, destroy, import, force-unlock, 'state rm'...; "
    "repeatable).",
)
@click.option(
    "--who",
    default=None,
    metavar="TEXT",
    help="Only records whose user, host or CI actor has TEXT.",
)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text")
@spec_dir_argument
@env_option
def state_audit(
    start: str | None,
    verify: bool,
    commands: tuple[str, ...],
    who: str | None,
    output_format: str,
    spec_dir: str,
    environment: str | None,
) -> None:
    """List the audit records: every state-changing command (started and completed),
    force-unlock, who and what."""
    backend = _backend(spec_dir, environment)
    if verify:
        _verify_audit(backend, output_format)
        return
    records = matching(since(backend.read_audit(), start), commands, who)
    if output_format == "json":
        click.echo(json.dumps({"formatVersion": 1, "records": records}, indent=2, sort_keys=True))
    else:
        click.echo(render_audit_table(records), nl=False)


def _verify_audit(backend, output_format: str) -> None:  # type: ignore[no-untyped-def]
    verdict = backend.verify_audit()
    if output_format == "json":
        click.echo(
            json.dumps(
                {
                    "formatVersion": 1,
                    "intact": verdict.intact,
                    "records": verdict.records,
                    "chained": verdict.chained,
                    "unchained": verdict.unchained,
                    "problems": verdict.problems,
                },
                indent=2,
                sort_keys=True,
            )
        )
    elif verdict.intact:
        unchained = f" ({verdict.unchained} older unchained)" if verdict.unchained else ""
        click.echo(
            f"Audit trail of {backend.location} is intact: {plural(verdict.chained, 'record')} "
            f"in one unbroken chain{unchained}, ending at its recorded head."
        )
    else:
        click.echo(
            f"Audit trail of {backend.location} was altered: "
            f"{plural(len(verdict.problems), 'problem')}:",
            err=True,
        )
        for problem in verdict.problems:
            click.echo(f"  {problem}", err=True)
    if not verdict.intact:
        raise SystemExit(1)


@click.command("force-unlock")
@click.argument("lock_id")
@click.option(
    "--force",
    is_flag=True,
    help="Also when the holder still runs on this host (its next state write then fails).",
)
@spec_dir_argument
@env_option
def force_unlock(lock_id: str, force: bool, spec_dir: str, environment: str | None) -> None:
    """Release a state lock left by a process that is gone."""
    backend = _backend(spec_dir, environment)
    held = backend.force_unlock(lock_id, force=force)
    backend.append_audit(audit_record("force-unlock", lock=held.to_json()))
    click.echo(
        f"Released lock {held.id} held by {held.holder}@{held.host} pid {held.pid} "
        f"for `{held.operation}` since {held.time}."
    )


class _ImportCommand(click.Command):
    """`import --help` ends with what ID means on each provider type (imported on demand:
    the provider modules are not loaded for any other command)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from trainform.providers.registry import PROVIDER_CLASSES, provider_class

        rows = [(kind, provider_class(kind).import_ids) for kind in sorted(PROVIDER_CLASSES)]
        with formatter.section("ID, by provider type"):
            formatter.write_dl(rows)


@click.command("import", cls=_ImportCommand)
@click.argument("arguments", nargs=-1, metavar="[ADDRESS ID] [SPEC_DIR]")
@click.option(
    "--from",
    "instance",
    metavar="INSTANCE",
    help="Write specs for everything provider INSTANCE has that the specs do not declare, "
    "and adopt it into state.",
)
@click.option(
    "--out",
    metavar="FILE",
    help="File (relative to SPEC_DIR) for the generated specs; default imported-INSTANCE.yaml "
    "under the first adminPaths folder of project-isolation, else imported/INSTANCE.yaml.",
)
@template_options
def import_command(
    arguments: tuple[str, ...],
    instance: str | None,
    out: str | None,
    inputs: TemplateInputs,
) -> None:
    """Adopt the live object ID as the resource ADDRESS declared in the specs, or, with
    --from, generate specs for a live platform and adopt all of it."""
    if instance is not None:
        if len(arguments) > 1:
            raise click.UsageError("with --from, give at most SPEC_DIR")
        _import_from(instance, arguments[0] if arguments else ".", out, inputs)
        return
    if len(arguments) not in (2, 3):
        raise click.UsageError("give ADDRESS and ID (and optionally SPEC_DIR), or --from INSTANCE")
    address, identifier, spec_dir = (*arguments, ".")[:3]
    workspace = open_or_exit(spec_dir, inputs, "text")
    info = workspace.backend.lock("import")
    try:
        import_resource(workspace, address, identifier)
    finally:
        workspace.backend.unlock(info)
        workspace.providers.close()
    click.echo(
        f"Imported {identifier} as {address}. Run plan to see how it differs from the specs."
    )


def _import_file(workspace: Workspace, instance: str) -> str:
    """Where generated specs go by default: under the trusted `adminPaths` of
    project-isolation, so that the adopted platform passes tenancy; else imported/."""
    from trainform.policies.builtin.isolation import admin_file
    from trainform.policies.trusted import PolicyConfigError, load_trusted

    try:
        trusted = load_trusted(None, workspace.config, workspace.root)
    except PolicyConfigError as exc:
        raise click.ClickException(str(exc)) from None
    params = trusted.settings.get("project-isolation", {})
    return admin_file(params, f"imported-{instance}.yaml") or f"imported/{instance}.yaml"


def _import_from(instance: str, spec_dir: str, out: str | None, inputs: TemplateInputs) -> None:
    from pathlib import Path

    from trainform.planner.generating import adopt_discovered, discover, write_discovered

    workspace = open_or_exit(spec_dir, inputs, "text")
    try:
        found = discover(workspace, instance)
    finally:
        workspace.providers.close()
    for line in found.skipped:
        click.echo(f"Skipped {line}.")
    if not found.new:
        click.echo(f"Nothing to import from {instance}: the specs declare everything it has.")
        return
    path = Path(spec_dir) / (out or _import_file(workspace, instance))
    write_discovered(found, path)
    try:
        workspace = open_or_exit(spec_dir, inputs, "text")
    except SystemExit:
        click.echo(f"The generated specs do not load; {path} was removed.", err=True)
        path.unlink()
        raise
    info = workspace.backend.lock("import")
    try:
        adopted = adopt_discovered(workspace, found)
    finally:
        workspace.backend.unlock(info)
        workspace.providers.close()
    for address in adopted:
        click.echo(f"Imported {address}.")
    click.echo(
        f"Wrote {len(adopted)} specs to {path} and adopted them into state. "
        "Run plan: it should show no changes."
    )
    from trainform.cli.policies import adoption_waivers

    suggestion = adoption_waivers(workspace, adopted)
    if suggestion:
        click.echo(
            "\nThe adopted platform already breaks policies that deny a plan. Nothing was "
            "changed; to adopt it as it is, add these waivers to your trusted policies.yaml "
            "(or fix the platform):\n\n" + suggestion
        )
