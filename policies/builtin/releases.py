"""Release policies: a release needs passing gates, and (where asked) CODEOWNERS approval.

`release-gates` (deny): a ModelRelease must require every EvalSuite its job binds in
`spec.evaluations` (leaving one out would publish a model that gate never judged), and in
a plan, every evaluation its `release` section relies on must have passed (the planner
already refuses a failed gate; this keeps the verdict in the policy report, where waivers
and reviews see it, and guards plans made by other means).

`release-approval` (deny): a ModelRelease with `spec.approval.required`, or whose version
matches `productionVersions` (a list of globs, e.g. `["*"]` for every release), must be
declared in a file CODEOWNERS gives owners, so the code host requires their approval of the
change; with `requireProjectOwners` (default true) at least one of those owners must be an
owner of the release's Project. The finding names who must approve.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.context import PolicyContext, Subject
from trainform.policies.findings import Severity


def check_gates(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    jobs = {(s.project, s.name): s for s in context.of_kind("TrainingJob")}
    planned = {
        change.address: change
        for change in (context.plan.changes if context.plan else [])
        if change.kind == "ModelRelease" and change.after
    }
    for release in context.of_kind("ModelRelease"):
        spec = release.spec
        job = jobs.get((release.project, spec.get("job"))) or jobs.get((None, spec.get("job")))
        required = set(spec.get("evaluations") or [])
        bound = [b["suite"] for b in (job.spec.get("evaluations") or [])] if job else []
        for suite in bound:
            if suite not in required:
                yield Violation(
                    release.address,
                    ("spec", "evaluations"),
                    f"job {spec.get('job')} is gated by EvalSuite {suite}, which the release "
                    "does not require: add it to spec.evaluations",
                    key=f"unrequired/{suite}",
                )
        change = planned.get(release.address)
        section = (change.after or {}).get("release") or {} if change else {}
        for index, evaluation in enumerate(section.get("evaluations") or []):
            if evaluation.get("verdict") != "pass":
                yield Violation(
                    release.address,
                    ("spec", "evaluations", index),
                    f"{evaluation.get('suite')} did not pass on run {section.get('runId')}: "
                    + "; ".join(g.get("text", "") for g in evaluation.get("gates") or []),
                    key=f"failed/{evaluation.get('suite')}",
                )


def _needs_approval(release: Subject, params: Mapping[str, Any]) -> bool:
    spec = release.spec
    if (spec.get("approval") or {}).get("required"):
        return True
    version = str(spec.get("version") or "")
    return any(fnmatch.fnmatchcase(version, str(p)) for p in params.get("productionVersions") or [])


def check_approval(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    projects = {s.name: s for s in context.of_kind("Project")}
    for release in context.of_kind("ModelRelease"):
        if not _needs_approval(release, params):
            continue
        owners = context.code_owners.owners_of(release.file)
        project = projects.get(release.project or "")
        project_owners = list((project.spec.get("owners") if project else None) or [])
        path = ("spec", "approval") if release.spec.get("approval") else ("spec", "version")
        if not owners:
            yield Violation(
                release.address,
                path,
                f"the release needs approval, but no CODEOWNERS line gives {release.file} "
                "owners, so the code host requires nobody's: add a line assigning it to "
                f"project {release.project}'s owners"
                + (f" ({', '.join(project_owners)})" if project_owners else ""),
                key="no-owners",
            )
            continue
        if params.get("requireProjectOwners", True) and project_owners:
            if not set(owners) & set(project_owners):
                yield Violation(
                    release.address,
                    path,
                    f"the release needs approval of project {release.project}'s owners "
                    f"({', '.join(project_owners)}), but CODEOWNERS gives {release.file} to "
                    f"{', '.join(owners)}: assign the file to the project's owners",
                    key="other-owners",
                )


RELEASE_GATES = BuiltinPolicy(
    id="release-gates",
    name="A release needs passing gates",
    severity=Severity.DENY,
    kinds=("ModelRelease", "TrainingJob"),
    check=check_gates,
    description="A ModelRelease requires every EvalSuite its job binds, and in a plan every "
    "evaluation it relies on passed on the released run.",
)

RELEASE_APPROVAL = BuiltinPolicy(
    id="release-approval",
    name="A release that needs approval is owned in CODEOWNERS",
    severity=Severity.DENY,
    kinds=("ModelRelease", "Project"),
    check=check_approval,
    parameters={"productionVersions": [], "requireProjectOwners": True},
    description="A ModelRelease with spec.approval.required (or a version matching "
    "productionVersions) lies in a file CODEOWNERS assigns to its project's owners, so the "
    "code host requires their approval.",
)
