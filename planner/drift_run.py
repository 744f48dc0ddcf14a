"""check_drift: one drift run as the CLI performs it.

detect (planner.drift) -> compare with the previous run of the history kept by the state
backend (planner.drift_history) -> mark acknowledged findings (planner.drift_acknowledgements)
-> append the compact run to the history. The platform and the state are only read; the
history beside the state is the one thing written, and only with `record=True`. A history
that cannot be written (a read-only folder, credentials that only read) does not fail the
run: the report is complete, and `DriftReport.not_recorded` says why it was not kept.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from trainform.planner.desired import build_desired
from trainform.planner.drift import detect_drift
from trainform.planner.drift_acknowledgements import (
    acknowledge,
    acknowledge_plan_findings,
    read_acknowledgements,
)
from trainform.planner.drift_history import compact_run, compare_with_history
from trainform.planner.drift_model import DriftReport
from trainform.planner.errors import PlannerError
from trainform.planner.plan_model import Plan
from trainform.planner.workspace import Workspace


def acknowledgements_folder(workspace: Workspace, policies_path: Path | None) -> Path | None:
    """The trusted folder: `--policies` (a folder, or the folder of a policies file), else
    trainform.yaml's `policies.path` (relative to the spec folder); None without either."""
    if policies_path is not None:
        return policies_path if policies_path.is_dir() else policies_path.parent
    configured = workspace.config.policies.path
    if not configured:
        return None
    folder = Path(configured)
    return folder if folder.is_absolute() else workspace.root / folder


def check_drift(
    workspace: Workspace,
    policies_path: Path | None = None,
    now: datetime | None = None,
    record: bool = True,
) -> DriftReport:
    moment = now or datetime.now(UTC)
    acknowledgements = read_acknowledgements(acknowledgements_folder(workspace, policies_path))
    report = detect_drift(
        workspace.backend.read(), workspace.providers, build_desired(workspace.specs), moment
    )
    runs = workspace.backend.drift_runs()
    compare_with_history(report, runs.read())
    acknowledge(report, acknowledgements, moment.date())
    if record and report.lineage is not None:
        try:
            runs.append(compact_run(report))
        except (OSError, PlannerError) as exc:
            cause = getattr(exc, "strerror", None) or str(exc)
            report.not_recorded = f"the drift history {runs.location} is not writable ({cause})"
    return report


def acknowledge_plan(
    workspace: Workspace, plan: Plan, policies_path: Path | None, now: datetime | None = None
) -> None:
    """Mark the plan's drift findings that the trusted acknowledgements cover, so plan and
    drift agree on what is open (and on the exit code)."""
    folder = acknowledgements_folder(workspace, policies_path)
    moment = now or datetime.now(UTC)
    acknowledge_plan_findings(plan.findings, read_acknowledgements(folder), moment.date())
