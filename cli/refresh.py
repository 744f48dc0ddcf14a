"""`plan --refresh-only` and `apply --refresh-only`: show, then record, live values in state.

Both read drift under the state lock and print the refresh-only plan (planner.refresh_only);
apply then asks for confirmation (or --auto-approve), writes the updates under the same
lock and appends an audit record. No provider is written by either.
"""

from __future__ import annotations

import sys

import click
from trainform.cli.render.refresh_text import render_refresh_only_text
from trainform.cli.render.style import paint, use_color
from trainform.cli.render.words import plural
from trainform.planner.audit import spec_commit
from trainform.planner.backends.base import LockInfo
from trainform.planner.errors import PlannerError
from trainform.planner.refresh_only import RefreshOnlyPlan, apply_refresh_only, plan_refresh_only
from trainform.planner.state import canonical_json, digest
from trainform.planner.workspace import Workspace

EXIT_CHANGES = 2


def _show(plan: RefreshOnlyPlan, output_format: str, workspace: Workspace | None = None) -> None:
    if output_format == "json":
        click.echo(canonical_json(plan.to_json()))
        return
    if workspace is not None:
        import os

        from trainform.cli.render.plan_text import target_line
        from trainform.specs.environments import state_location

        specs = workspace.specs
        header = target_line(
            specs.environment,
            os.path.normpath(str(specs.root)),
            state_location(specs.config, specs.root),
        )
        click.echo(paint(header, "dim", use_color()) + "\n", color=use_color())
    click.echo(render_refresh_only_text(plan, use_color()), nl=False, color=use_color())


def plan_refresh_only_command(
    workspace: Workspace, output_format: str, detailed_exitcode: bool, take_lock: bool
) -> None:
    info = workspace.backend.lock("plan") if take_lock else None
    try:
        plan = plan_refresh_only(workspace)
    finally:
        if info is not None:
            workspace.backend.unlock(info)
        workspace.providers.close()
    _show(plan, output_format, workspace)
    if detailed_exitcode and plan.has_changes:
        sys.exit(EXIT_CHANGES)


def apply_refresh_only_command(workspace: Workspace, auto_approve: bool, confirm: object) -> None:
    """`confirm(auto_approve, verb)` is the apply command's prompt (it exits on a no)."""
    info = workspace.backend.lock("apply")
    try:
        plan = plan_refresh_only(workspace)
        workspace.providers.close()
        _show(plan, "text")
        if not plan.has_changes:
            return
        confirm(auto_approve, "record these live values in state")  # type: ignore[operator]
        state = apply_refresh_only(workspace, plan)
        _audit(workspace, plan, info, state.serial)
    except PlannerError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        workspace.backend.unlock(info)
    click.echo(
        f"\nRefresh complete: {plural(len(plan.updates), 'state entry', 'state entries')} "
        "updated, no provider changed."
    )


def _audit(workspace: Workspace, plan: RefreshOnlyPlan, info: LockInfo, serial: int) -> None:
    try:
        workspace.backend.finish_audit(
            info,
            operation="apply-refresh-only",
            spec_root=workspace.root,
            environment=workspace.specs.environment,
            specCommit=spec_commit(workspace.root),
            planDigest=digest(plan.to_json()),
            state={
                "location": workspace.backend.location,
                "lineage": plan.lineage,
                "serialBefore": plan.serial,
                "serialAfter": serial,
            },
            outcome="succeeded",
            changes=[{"address": u.address, "action": u.action} for u in plan.updates],
        )
    except PlannerError as exc:
        click.echo(f"warning: the audit record of this refresh was not written: {exc}", err=True)
