"""Merging pull requests whose plans overlap: apply a stale reviewed plan's changes when a
fresh plan makes exactly them, compare two saved plans, and tell a plan which open pull
request holds the resources it changes.

- `apply PLAN --replan-if-same-changes` (called from cli.engine's `apply`): plan again now,
  under the state lock, for the reviewed plan's spec folder, environment, variables and
  scope; apply that fresh plan only when it makes the same changes as the reviewed one
  (planner.plan_compare), policies permitting; otherwise apply nothing, print why the
  reviewed plan is stale and what differs (both values each), save the fresh plan when
  asked, and exit 4.
- `plan-diff REVIEWED FRESH`: the same comparison of two saved plans, exit 0 or 4.
- `plan-overlap PLAN --held-by LABEL=PLAN ...`: the resources PLAN changes that the plans of
  the holders (other open pull requests, in the order the caller gives) change too, exit
  0 or 4.

Exit codes: 0 applied or the same changes, 1 error, 3 a policy denies, 4 the plans differ
(or overlap).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from trainform.cli.applying import AuditContext, run_apply
from trainform.cli.options import TemplateInputs, format_option, no_color_option
from trainform.cli.output import open_or_exit
from trainform.cli.policies import (
    checked_and_rendered,
    exit_if_denied,
    render_plan_with_policies,
    saved_report,
)
from trainform.cli.render.plan_comparison import (
    render_comparison_json,
    render_comparison_markdown,
    render_comparison_text,
    render_overlaps_json,
    render_overlaps_markdown,
    render_overlaps_text,
)
from trainform.cli.render.plan_text import render_plan_text
from trainform.cli.render.style import use_color
from trainform.planner.lockfile import LockFile
from trainform.planner.plan import PlanOptions, make_plan
from trainform.planner.plan_compare import compare_plans, overlaps, read_touched
from trainform.planner.plan_model import Plan, StalePlanError
from trainform.planner.saved_plans import comparable_location
from trainform.planner.state import digest
from trainform.planner.variables import replayed_variables, saved_variables
from trainform.planner.workspace import Workspace
from trainform.policies.engine import PolicyReport
from trainform.policies.plan_file import plan_file_bytes
from trainform.specs.file_writes import write_file

EXIT_PLANS_DIFFER = 4


def _replan_options(workspace: Workspace, reviewed: Plan, locked: bool, mass: bool) -> PlanOptions:
    return PlanOptions(
        refresh=True,
        targets=tuple(reviewed.targets),
        destroy=reviewed.destroy,
        allow_mass_delete=mass,
        mass_delete_share=workspace.config.policies.mass_delete_share,
        lock_digest=workspace.lock_digest(),
        lock=LockFile.read(workspace.root),
        locked=locked,
    )


def _save_fresh(
    fresh: Plan, workspace: Workspace, variables: tuple[str, ...], report: PolicyReport, out: str
) -> None:
    fresh.variables = saved_variables(variables)
    fresh.state_location = comparable_location(workspace.backend.location)
    fresh.state_binding = comparable_location(workspace.backend.location, workspace.root.resolve())
    write_file(out, plan_file_bytes(fresh, workspace.root.resolve(), report))
    click.echo(
        f"Saved the fresh plan to {out}; once approved, apply it with: trainform apply {out}"
    )


def apply_replanned(
    target: str,
    inputs: TemplateInputs,
    parallelism: int,
    policies_path: Path | None,
    locked: bool,
    allow_mass_delete: bool,
    fresh_out: str | None,
) -> None:
    """Apply the changes of the reviewed plan `target` through a plan made now, only when
    that plan makes exactly them (see the module docstring)."""
    reviewed, spec_root = Plan.from_file(target)
    exit_if_denied(saved_report(target))
    if inputs.environment is not None and inputs.environment != reviewed.environment:
        raise StalePlanError(
            f"cannot apply plan {target}: it was made for environment "
            f"{reviewed.environment or '(none)'}, apply was asked for {inputs.environment}"
        )
    variables = replayed_variables(reviewed.variables, inputs.variables)
    workspace = open_or_exit(
        str(spec_root), TemplateInputs(reviewed.environment, variables, inputs.var_files), "text"
    )
    info = workspace.backend.lock("apply")
    try:
        fresh = make_plan(
            workspace.specs,
            workspace.backend.read(),
            workspace.providers,
            _replan_options(workspace, reviewed, locked, allow_mass_delete),
        )
        comparison = compare_plans(reviewed, fresh)
        report, rendered = checked_and_rendered(
            workspace, fresh, policies_path, lambda: render_plan_text(fresh, use_color())
        )
        click.echo(render_comparison_text(comparison, target))
        if not comparison.same_changes:
            if fresh_out:
                _save_fresh(fresh, workspace, variables, report, fresh_out)
            click.echo(
                "Nothing was applied: the fresh plan needs its own review (exit 4).", err=True
            )
            sys.exit(EXIT_PLANS_DIFFER)
        rendered = render_plan_with_policies(rendered, fresh, report.to_json(), "text")
        click.echo(rendered, nl=False, color=use_color())
        exit_if_denied(report)
    except BaseException:
        workspace.backend.unlock(info)
        workspace.providers.close()
        raise
    if not fresh.has_changes:
        workspace.backend.unlock(info)
        workspace.providers.close()
        return
    audit = AuditContext(
        "apply", workspace.root, fresh.environment, digest(fresh.to_json()), target
    )
    run_apply(fresh, workspace.backend, workspace.providers, parallelism, target, audit, info)


@click.command("plan-diff")
@click.argument("reviewed_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("fresh_file", type=click.Path(exists=True, dir_okay=False))
@format_option("text", "json", "markdown")
@no_color_option
def plan_diff(reviewed_file: str, fresh_file: str, output_format: str) -> None:
    """Compare the saved plan REVIEWED_FILE with FRESH_FILE, made later for the same target:
    why the reviewed plan is stale (each binding with both values) and whether FRESH_FILE
    makes the same changes (same resources, actions and field values).

    Exit 0 when it does (the fresh plan may be applied in place of the reviewed one), 4 when
    the changes differ or the plans are for different targets, 1 on error."""
    reviewed, _ = Plan.from_file(reviewed_file)
    fresh, _ = Plan.from_file(fresh_file)
    comparison = compare_plans(reviewed, fresh)
    if output_format == "json":
        click.echo(render_comparison_json(comparison), nl=False)
    elif output_format == "markdown":
        click.echo(render_comparison_markdown(comparison, reviewed_file))
    else:
        click.echo(render_comparison_text(comparison, reviewed_file), nl=False)
    if not comparison.same_changes:
        sys.exit(EXIT_PLANS_DIFFER)


def _holder(value: str) -> tuple[str, str]:
    label, sep, path = value.partition("=")
    if not sep or not label or not path:
        raise click.UsageError(
            f"--held-by takes LABEL=PLAN_FILE (e.g. '#12=pr-12.tfplan'), got {value!r}"
        )
    return label, path


@click.command("plan-overlap")
@click.argument("plan_file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--held-by",
    "holders",
    multiple=True,
    metavar="LABEL=PLAN",
    help="The plan (saved, or `plan --format json` output) of another open pull request that "
    "holds what it changes, e.g. '#12=pr-12.tfplan' (repeatable; give the holders in the "
    "order they took their resources, oldest first).",
)
@format_option("text", "json", "markdown")
@no_color_option
def plan_overlap(plan_file: str, holders: tuple[str, ...], output_format: str) -> None:
    """Tell PLAN_FILE (a saved plan or `plan --format json` output) which resources it
    changes are held by another open pull request's plan, in the manner of Atlantis'
    locks: a pipeline passes the plans of the pull requests that planned before this one.

    Exit 0 when nothing overlaps, 4 when a holder changes a resource PLAN_FILE changes too,
    1 on error. Advice only: plans are read without verifying their checksums."""
    mine = read_touched(plan_file)
    found = overlaps(mine, [(label, read_touched(path)) for label, path in map(_holder, holders)])
    if output_format == "json":
        click.echo(render_overlaps_json(found), nl=False)
    elif output_format == "markdown":
        click.echo(render_overlaps_markdown(found, plan_file), nl=False)
    else:
        click.echo(render_overlaps_text(found, plan_file), nl=False)
    if found:
        sys.exit(EXIT_PLANS_DIFFER)
