"""Running an apply from the CLI: the lock it runs under, its progress lines, the outcome
table, and the completed audit record. Called by cli.engine (apply, destroy, a saved plan).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from trainform.cli.render.words import plural
from trainform.planner.audit import spec_commit
from trainform.planner.backends.base import LockInfo, StateBackend
from trainform.planner.errors import PlannerError
from trainform.planner.plan_model import Plan, ResourceChange
from trainform.planner.session import ProviderSet
from trainform.planner.signals import graceful_stop, received

if TYPE_CHECKING:  # plan must not import the apply machinery
    from trainform.planner.apply import ApplyResult


@dataclass(frozen=True)
class AuditContext:
    """What the audit record of an apply says beyond its outcomes."""

    operation: str
    spec_root: Path
    environment: str | None
    plan_digest: str
    plan_file: str | None = None


def print_event(kind: str, change: ResourceChange, detail: str) -> None:
    verbs = {
        "create": "creating",
        "update": "updating",
        "replace": "replacing",
        "delete": "deleting",
    }
    if kind == "start":
        click.echo(f"{change.address}: {verbs.get(change.action.value, change.action.value)}...")
    elif kind == "done":
        click.echo(f"{change.address}: {change.action.value} complete after {detail}")
    elif kind == "failed":
        click.echo(f"{change.address}: {change.action.value} FAILED: {detail}", err=True)


def print_outcomes(result: ApplyResult, destroying: bool = False) -> None:
    from trainform.planner.apply import OutcomeStatus

    noun = "Destroy" if destroying else "Apply"
    if result.failed:
        click.echo("\nOutcome:")
        for outcome in result.outcomes:
            message = f": {outcome.message}" if outcome.message else ""
            click.echo(
                f"  {outcome.status.value:<11} {outcome.action.value:<8} {outcome.address}{message}"
            )
    applied = result.count(OutcomeStatus.APPLIED)
    failed = result.count(OutcomeStatus.FAILED)
    skipped = result.count(OutcomeStatus.SKIPPED) + result.count(OutcomeStatus.NOT_STARTED)
    if result.interrupted:
        click.echo(
            f"\nInterrupted: {applied} applied, {failed} failed, {skipped} not done. "
            "State is saved; run plan to see what is left.",
            err=True,
        )
    elif result.failed:
        click.echo(
            f"\n{noun} failed: {applied} applied, {failed} failed, {skipped} skipped.", err=True
        )
    elif destroying:
        click.echo(f"\nDestroy complete: {plural(applied, 'resource')} destroyed.")
    else:
        click.echo(f"\nApply complete: {plural(applied, 'change')} applied.")


def run_apply(
    plan_to_apply: Plan,
    backend: StateBackend,
    providers: ProviderSet,
    parallelism: int,
    location: str,
    audit: AuditContext,
    held: LockInfo | None = None,
) -> None:
    from trainform.planner.apply import apply_plan

    info = held or backend.lock(audit.operation)
    before = (plan_to_apply.lineage, plan_to_apply.serial)
    try:
        with graceful_stop(lambda: backend.unlock(info)) as stop:
            result = apply_plan(
                plan_to_apply,
                backend,
                providers,
                parallelism=parallelism,
                on_event=print_event,
                location=location,
                stop=stop,
            )
        finish_apply_audit(backend, audit, plan_to_apply, result, info, before)
    finally:
        backend.unlock(info)
        providers.close()
    print_outcomes(result, destroying=plan_to_apply.destroy)
    if result.failed:
        sys.exit(128 + (received() or 2) if result.interrupted else 1)


def finish_apply_audit(
    backend: StateBackend,
    audit: AuditContext,
    plan_to_apply: Plan,
    result: ApplyResult,
    info: LockInfo,
    before: tuple[str | None, int],
) -> None:
    """Record the apply; a failure to record is reported, never hides the outcome."""
    counts: dict[str, int] = {}
    for outcome in result.outcomes:
        counts[outcome.status.value] = counts.get(outcome.status.value, 0) + 1
    fields = dict(
        spec_root=audit.spec_root,
        environment=audit.environment,
        specCommit=spec_commit(audit.spec_root),
        planDigest=audit.plan_digest,
        planFile=audit.plan_file,
        state={
            "location": backend.location,
            "lineage": result.lineage or before[0],
            "serialBefore": before[1],
            "serialAfter": result.serial if result.lineage else before[1],
        },
        outcome="interrupted" if result.interrupted else "failed" if result.failed else "succeeded",
        interrupted=result.interrupted or None,
        summary=counts,
        changes=[
            {
                "address": o.address,
                "action": o.action.value,
                "outcome": o.status.value,
                **({"message": o.message} if o.message else {}),
            }
            for o in result.outcomes
        ],
    )
    try:
        backend.finish_audit(info, operation=audit.operation, **fields)
    except PlannerError as exc:
        click.echo(
            f"warning: the audit record of this {audit.operation} was not written: {exc}",
            err=True,
        )
