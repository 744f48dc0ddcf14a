"""Policies on the command line: the `--policies PATH` option (declared in cli_options,
shared with validate and review), running the engine after a plan, showing findings in
each output format, and exit code 3 on an unwaived deny.

`plan` and `apply DIR` evaluate policies on the fresh plan; `plan -out` stores the report in
the saved plan (covered by its checksum), and `apply FILE` refuses a plan whose report
denied. Policies come from `--policies PATH` (trusted: in CI the base branch checkout) or,
without it, from trainform.yaml's `policies:` section.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from trainform.cli.options import policies_option as policies_option  # re-exported
from trainform.cli.render.findings import render_findings_markdown, render_findings_text
from trainform.cli.render.plan_markdown import DEFAULT_BUDGET, render_plan_markdown
from trainform.cli.render.style import use_color
from trainform.cli.render.words import plural
from trainform.planner.plan_model import Plan
from trainform.planner.workspace import Workspace
from trainform.policies.engine import PolicyReport, evaluate_policies
from trainform.policies.plan_file import saved_policy_report
from trainform.policies.trusted import PolicyConfigError, TrustedPolicies, load_trusted
from trainform.specs.split_work import alongside

EXIT_POLICY_DENIED = 3


POLICY_WEIGHT = 0.4
"""Checking every policy costs about 0.4 of rendering the plan's text (10,000 resources)."""


def trusted_or_exit(workspace: Workspace, policies_path: Path | None) -> TrustedPolicies:
    """The trusted policies (`--policies PATH`, else trainform.yaml's); a bad file exits."""
    try:
        return load_trusted(policies_path, workspace.config, workspace.root)
    except PolicyConfigError as exc:
        raise click.ClickException(str(exc)) from None


def check_policies(workspace: Workspace, plan: Plan, policies_path: Path | None) -> PolicyReport:
    return evaluate_policies(workspace.specs, plan, trusted_or_exit(workspace, policies_path))


def checked_and_rendered(
    workspace: Workspace, plan: Plan, policies_path: Path | None, render: Callable[[], str]
) -> tuple[PolicyReport, str]:
    """The policy report of `plan` and `render()`, the policies checked by the second core
    while a large plan renders (specs.split_work). The trusted policies are read first,
    so a bad policy file fails before anything is rendered."""
    trusted = trusted_or_exit(workspace, policies_path)
    with alongside(lambda: evaluate_policies(workspace.specs, plan, trusted), POLICY_WEIGHT) as job:
        rendered = render()
    return job.result(), rendered


def adoption_waivers(workspace: Workspace, addresses: list[str]) -> str:
    """Waivers to suggest for the policies an adopted platform already breaks."""
    from datetime import date, timedelta

    from trainform.policies.waivers import suggest_waivers

    report = evaluate_policies(workspace.specs, None, trusted_or_exit(workspace, None))
    return suggest_waivers(report.findings, addresses, date.today() + timedelta(days=90))


def render_plan_with_policies(
    rendered_plan: str,
    plan: Plan,
    report: dict[str, Any] | None,
    output_format: str,
    budget: int = DEFAULT_BUDGET,
) -> str:
    """The plan in `output_format` with the policy findings added (JSON: a `policies` key;
    Markdown: a section after the counts, the whole within `budget` characters)."""
    if report is None:
        return rendered_plan
    if output_format == "json":
        return json.dumps({**plan.to_json(), "policies": report}, indent=2, sort_keys=True) + "\n"
    parsed = PolicyReport.from_json(report)
    if output_format == "markdown":
        return render_plan_markdown(plan, render_findings_markdown(parsed), budget)
    section = render_findings_text(parsed, use_color())
    return rendered_plan + ("\n" + section if section else "")


def exit_if_denied(report: PolicyReport | dict[str, Any] | None) -> None:
    """Exit 3, saying so on stderr, when an unwaived deny finding remains."""
    if report is None:
        return
    parsed = PolicyReport.from_json(report) if isinstance(report, dict) else report
    if parsed.denied:
        count = parsed.counts()["deny"]
        click.echo(
            f"error: blocked by policy: {plural(count, 'deny finding')}; fix them or add a "
            "waiver to the trusted policies. Nothing was applied.",
            err=True,
        )
        sys.exit(EXIT_POLICY_DENIED)


def saved_report(plan_file: str) -> dict[str, Any] | None:
    return saved_policy_report(plan_file)
