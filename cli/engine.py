"""CLI commands that plan and change platforms: plan, apply, destroy, show (drift: cli_drift)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from trainform.cli.applying import AuditContext, run_apply
from trainform.cli.options import (
    TemplateInputs,
    format_option,
    lock_timeout_option,
    markdown_budget_option,
    no_color_option,
    refresh_only_option,
    spec_dir_argument,
    template_options,
    timeout_option,
)
from trainform.cli.output import open_or_exit
from trainform.cli.policies import (
    checked_and_rendered,
    exit_if_denied,
    policies_option,
    render_plan_with_policies,
    saved_report,
)
from trainform.cli.refresh import apply_refresh_only_command, plan_refresh_only_command
from trainform.cli.render.plan_comparison import render_bindings_markdown, render_bindings_text
from trainform.cli.render.plan_json import render_plan_json
from trainform.cli.render.plan_markdown import DEFAULT_BUDGET, render_plan_markdown
from trainform.cli.render.plan_text import render_plan_text
from trainform.cli.render.style import use_color
from trainform.cli.replanning import apply_replanned
from trainform.planner.backends.base import LockInfo
from trainform.planner.backends.identity import AcceptRequest
from trainform.planner.drift_run import acknowledge_plan
from trainform.planner.lockfile import LockFile
from trainform.planner.plan import PlanOptions, make_plan
from trainform.planner.plan_model import Plan
from trainform.planner.plan_signing import SIGNATURE
from trainform.planner.saved_plans import check_bindings, check_datasets, comparable_location
from trainform.planner.session import ProviderSet, config_from_data
from trainform.planner.state import digest
from trainform.planner.variables import replayed_variables, saved_variables
from trainform.planner.workspace import Workspace, make_backend
from trainform.policies.plan_file import plan_file_bytes
from trainform.specs.file_writes import write_file

if TYPE_CHECKING:
    pass

EXIT_CHANGES = 2


def _render_plan(plan: Plan, output_format: str, budget: int = DEFAULT_BUDGET) -> str:
    if output_format == "json":
        return render_plan_json(plan)
    if output_format == "markdown":
        return render_plan_markdown(plan, budget=budget)
    return render_plan_text(plan, use_color())


def _plan_options(
    workspace: Workspace,
    refresh: bool,
    targets: tuple[str, ...],
    destroy: bool,
    allow_mass_delete: bool,
    locked: bool = False,
    replace: tuple[str, ...] = (),
) -> PlanOptions:
    return PlanOptions(
        refresh=refresh,
        targets=targets,
        replace=replace,
        destroy=destroy,
        allow_mass_delete=allow_mass_delete,
        mass_delete_share=workspace.config.policies.mass_delete_share,
        lock_digest=workspace.lock_digest(),
        lock=LockFile.read(workspace.root),
        locked=locked,
    )


def plan_options(func):  # type: ignore[no-untyped-def]
    func = timeout_option(func)
    func = click.option(
        "--target",
        "-target",
        "targets",
        multiple=True,
        metavar="ADDRESS",
        help="Only this resource and what it depends on (repeatable).",
    )(func)
    func = click.option(
        "--replace",
        "-replace",
        "replace",
        multiple=True,
        metavar="ADDRESS",
        help="Re-create this resource although nothing changed; for a TrainingJob, start a "
        "new run (repeatable).",
    )(func)
    func = click.option(
        "--refresh/--no-refresh",
        default=True,
        show_default=True,
        help="Observe live objects before planning.",
    )(func)
    func = click.option(
        "--allow-mass-delete", is_flag=True, help="Allow a plan that deletes most of the platform."
    )(func)
    func = click.option(
        "--locked",
        is_flag=True,
        help="Fail unless trainform.lock exists and matches what resolves now (for CI).",
    )(func)
    func = click.option(
        "--accept-state",
        is_flag=True,
        expose_value=False,
        callback=_accept_state,
        help="Use the state found even though it is not the one last written here (another "
        "lineage, an older serial, or none); the swap is recorded.",
    )(func)
    return func


def _accept_state(context: click.Context, parameter: click.Parameter, value: bool) -> None:
    if value:
        AcceptRequest.reason = f"--accept-state on `trainform {context.info_name}`"


def _plan_holding_lock(
    workspace: Workspace, options: PlanOptions, operation: str
) -> tuple[Plan, LockInfo]:
    """Plan under the lock and keep it for the apply that follows: no other run can change
    state between the plan shown and its apply (a run waiting with --lock-timeout waits for
    both)."""
    info = workspace.backend.lock(operation)
    try:
        return (
            make_plan(workspace.specs, workspace.backend.read(), workspace.providers, options),
            info,
        )
    except BaseException:
        workspace.backend.unlock(info)
        raise


def _locked_plan(
    workspace: Workspace, options: PlanOptions, operation: str, take_lock: bool = True
) -> Plan:
    if not take_lock:
        return make_plan(workspace.specs, workspace.backend.read(), workspace.providers, options)
    info = workspace.backend.lock(operation)
    try:
        return make_plan(workspace.specs, workspace.backend.read(), workspace.providers, options)
    finally:
        workspace.backend.unlock(info)


@click.command()
@spec_dir_argument
@template_options
@plan_options
@click.option(
    "-out",
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    help="Save the plan to FILE for `trainform apply FILE`.",
)
@click.option("--destroy", "-destroy", is_flag=True, help="Plan to delete everything in state.")
@click.option(
    "--lock/--no-lock",
    "take_lock",
    default=True,
    show_default=True,
    help="Hold the state lock while planning. --no-lock reads state without writing anything "
    "(read-only CI credentials); a saved plan still binds the state serial it was made from.",
)
@click.option(
    "--detailed-exitcode",
    "-detailed-exitcode",
    is_flag=True,
    help="Exit 0 when there are no changes and no drift findings, 2 when there are (a finding "
    "drift also reports: orphaned, retries-exhausted, data-mutated, tag-moved...; not one "
    "that is acknowledged), 1 on error (3: denied by policy). See docs/drift.md.",
)
@policies_option
@format_option("text", "json", "markdown")
@markdown_budget_option
@lock_timeout_option
@no_color_option
@refresh_only_option
def plan(
    spec_dir: str,
    inputs: TemplateInputs,
    targets: tuple[str, ...],
    replace: tuple[str, ...],
    refresh: bool,
    locked: bool,
    allow_mass_delete: bool,
    out: str | None,
    destroy: bool,
    take_lock: bool,
    detailed_exitcode: bool,
    policies_path: Path | None,
    output_format: str,
    budget: int,
    refresh_only: bool,
) -> None:
    """Show what apply would change to make the platform match the specs, and check it
    against the policies (exit 3 when a deny finding is not waived)."""
    markdown = output_format == "markdown"
    workspace = open_or_exit(spec_dir, inputs, output_format, budget if markdown else None)
    if refresh_only:
        _refuse_with_refresh_only(targets, replace, destroy, out, markdown)
        plan_refresh_only_command(workspace, output_format, detailed_exitcode, take_lock)
        return
    try:
        result = _locked_plan(
            workspace,
            _plan_options(workspace, refresh, targets, destroy, allow_mass_delete, locked, replace),
            "plan",
            take_lock,
        )
    finally:
        workspace.providers.close()
    acknowledge_plan(workspace, result, policies_path)
    report, rendered = checked_and_rendered(
        workspace, result, policies_path, lambda: _render_plan(result, output_format, budget)
    )
    rendered = render_plan_with_policies(rendered, result, report.to_json(), output_format, budget)
    click.echo(rendered, nl=False, color=use_color())
    if out:
        result.variables = saved_variables(inputs.variables)
        result.state_location = comparable_location(workspace.backend.location)
        result.state_binding = comparable_location(
            workspace.backend.location, Path(spec_dir).resolve()
        )
        write_file(out, plan_file_bytes(result, Path(spec_dir).resolve(), report))
        if output_format == "text" and report.denied:
            click.echo(f"\nSaved the plan to {out}; policies deny it, so apply will refuse it.")
        elif output_format == "text":
            click.echo(f"\nSaved the plan to {out}. Apply exactly it with: trainform apply {out}")
    exit_if_denied(report)
    if detailed_exitcode and (result.has_changes or result.drift_findings):
        sys.exit(EXIT_CHANGES)


def _refuse_with_refresh_only(
    targets: tuple[str, ...], replace: tuple[str, ...], destroy: bool, out: str | None, md: bool
) -> None:
    given = [
        name
        for name, used in (
            ("--target", targets),
            ("--replace", replace),
            ("--destroy", destroy),
            ("-out", out),
            ("--format markdown", md),
        )
        if used
    ]
    if given:
        raise click.UsageError(f"--refresh-only cannot be combined with {', '.join(given)}")


def _apply_saved(target: str, inputs: TemplateInputs, parallelism: int) -> None:
    """Apply the plan file `target` exactly, after proving it is still the reviewed one."""
    from trainform.planner.apply import check_fresh

    saved, spec_root = Plan.from_file(target)
    config = config_from_data(saved.config)
    backend = make_backend(config, spec_root, saved.environment)
    saved, desired = check_bindings(
        saved,
        spec_root,
        backend.location,
        target,
        inputs.environment,
        replayed_variables(saved.variables, inputs.variables),
        inputs.var_files,
    )
    check_fresh(saved, backend.read(), target)
    providers = ProviderSet(config, spec_root)
    try:
        check_datasets(saved, desired, spec_root, providers, target)
        report = saved_report(target)
        rendered = render_plan_with_policies(
            render_plan_text(saved, use_color()), saved, report, "text"
        )
        click.echo(rendered, nl=False, color=use_color())
        exit_if_denied(report)
    except BaseException:
        providers.close()
        raise
    if not saved.has_changes:
        providers.close()
        return
    audit = AuditContext(
        "apply",
        spec_root,
        saved.environment,
        "sha256:" + hashlib.sha256(Path(target).read_bytes()).hexdigest(),
        target,
    )
    run_apply(saved, backend, providers, parallelism, target, audit)


def _confirm(auto_approve: bool, verb: str) -> None:
    if auto_approve:
        return
    if not sys.stdin.isatty():
        raise click.ClickException(
            f"refusing to {verb} without confirmation: no terminal to ask "
            "on; pass --auto-approve or apply a saved plan"
        )
    if (
        click.prompt(
            f"Do you want to {verb}? Only 'yes' will be accepted", default="", show_default=False
        )
        != "yes"
    ):
        click.echo(f"{'Destroy' if verb.startswith('destroy') else 'Apply'} cancelled.")
        sys.exit(1)


@click.command()
@click.argument("target", default=".", type=click.Path(exists=True))
@template_options
@plan_options
@click.option("--auto-approve", "-auto-approve", is_flag=True, help="Skip the confirmation prompt.")
@click.option(
    "--parallelism",
    "-parallelism",
    default=10,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Provider calls in flight at once.",
)
@click.option(
    "--replan-if-same-changes",
    "replan",
    is_flag=True,
    help="For a saved plan FILE (a reviewed pull request's): plan again now, under the state "
    "lock, and apply that plan only if it makes the same changes as FILE (same resources, "
    "actions and field values), however stale FILE is; otherwise apply nothing, print why "
    "FILE is stale and what differs, and exit 4. See docs/plan-format.md.",
)
@click.option(
    "--save-fresh-plan",
    "fresh_out",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="With --replan-if-same-changes: when the fresh plan differs, save it to FILE for an "
    "approved `trainform apply FILE`.",
)
@policies_option
@lock_timeout_option
@no_color_option
@refresh_only_option
def apply(
    target: str,
    inputs: TemplateInputs,
    targets: tuple[str, ...],
    replace: tuple[str, ...],
    refresh: bool,
    locked: bool,
    allow_mass_delete: bool,
    auto_approve: bool,
    parallelism: int,
    replan: bool,
    fresh_out: str | None,
    policies_path: Path | None,
    refresh_only: bool,
) -> None:
    """Apply a saved plan FILE exactly, or plan SPEC_DIR and apply after confirmation.

    Refused with exit 3 when policies deny (for FILE: the report saved with the plan).
    With --refresh-only: record the live values of what changed outside trainform in state
    (shown first), changing no provider."""
    if refresh_only:
        if os.path.isfile(target):
            raise click.UsageError("--refresh-only reads the live platform; give SPEC_DIR")
        _refuse_with_refresh_only(targets, replace, False, None, False)
        apply_refresh_only_command(open_or_exit(target, inputs, "text"), auto_approve, _confirm)
        return
    if os.path.isfile(target):
        if targets or replace:
            raise click.UsageError(
                "--target and --replace shape a new plan; a saved plan is applied exactly as "
                "it was made (pass them to `trainform plan -out` instead)"
            )
        if replan:
            apply_replanned(
                target, inputs, parallelism, policies_path, locked, allow_mass_delete, fresh_out
            )
        else:
            _apply_saved(target, inputs, parallelism)
        return
    if replan or fresh_out:
        raise click.UsageError(
            "--replan-if-same-changes and --save-fresh-plan take a saved plan FILE"
        )
    workspace = open_or_exit(target, inputs, "text")
    fresh, info = _plan_holding_lock(
        workspace,
        _plan_options(workspace, refresh, targets, False, allow_mass_delete, locked, replace),
        "apply",
    )
    try:
        report, rendered = checked_and_rendered(
            workspace, fresh, policies_path, lambda: render_plan_text(fresh, use_color())
        )
        rendered = render_plan_with_policies(rendered, fresh, report.to_json(), "text")
        click.echo(rendered, nl=False, color=use_color())
        if report.denied:
            workspace.providers.close()
            exit_if_denied(report)
    except BaseException:
        workspace.backend.unlock(info)
        raise
    _confirm_and_apply(
        workspace, fresh, "apply", "apply these changes", auto_approve, parallelism, info
    )


@click.command()
@spec_dir_argument
@template_options
@click.option("--auto-approve", "-auto-approve", is_flag=True, help="Skip the confirmation prompt.")
@click.option(
    "--parallelism", "-parallelism", default=10, show_default=True, type=click.IntRange(1, 256)
)
@lock_timeout_option
@timeout_option
@no_color_option
def destroy(
    spec_dir: str,
    inputs: TemplateInputs,
    auto_approve: bool,
    parallelism: int,
) -> None:
    """Delete everything trainform manages for SPEC_DIR (data is kept unless asked)."""
    workspace = open_or_exit(spec_dir, inputs, "text")
    doomed, info = _plan_holding_lock(
        workspace, _plan_options(workspace, True, (), True, True), "destroy"
    )
    try:
        click.echo(render_plan_text(doomed, use_color()), nl=False, color=use_color())
    except BaseException:
        workspace.backend.unlock(info)
        raise
    _confirm_and_apply(
        workspace, doomed, "destroy", "destroy these resources", auto_approve, parallelism, info
    )


def _confirm_and_apply(
    workspace: Workspace,
    plan: Plan,
    operation: str,
    verb: str,
    auto_approve: bool,
    parallelism: int,
    info: LockInfo,
) -> None:
    """Apply a plan just made from the spec folder under the lock `info`, once confirmed;
    nothing when it has no changes. The lock is released either way."""
    if not plan.has_changes:
        workspace.backend.unlock(info)
        workspace.providers.close()
        return
    try:
        _confirm(auto_approve, verb)
    except BaseException:
        workspace.backend.unlock(info)
        raise
    audit = AuditContext(
        operation, workspace.root, workspace.specs.environment, digest(plan.to_json())
    )
    run_apply(plan, workspace.backend, workspace.providers, parallelism, "the plan", audit, info)


@click.command()
@click.argument("plan_file", type=click.Path(exists=True, dir_okay=False))
@format_option("text", "json", "markdown")
@markdown_budget_option
@no_color_option
def show(plan_file: str, output_format: str, budget: int) -> None:
    """Show a saved plan, then what it binds (text and Markdown; JSON has them as keys):
    environment, state location, lineage and serial, spec and lock digests, pins, tool
    version, variables and whether it is signed."""
    saved, _ = Plan.from_file(plan_file)
    rendered = render_plan_with_policies(
        _render_plan(saved, output_format, budget),
        saved,
        saved_report(plan_file),
        output_format,
        budget,
    )
    if output_format != "json":
        signed = SIGNATURE in json.loads(Path(plan_file).read_bytes())
        render = render_bindings_markdown if output_format == "markdown" else render_bindings_text
        rendered += "\n" + render(saved, signed)
    click.echo(rendered, nl=False, color=use_color())
