"""Project isolation: a project's resources only from its own spec paths; admin kinds only
from the admin paths.

Paths are globs relative to the spec folder, matched with `fnmatch` (`*` also matches `/`,
so `teams/a/**` and `teams/a/*` both cover everything below teams/a). A Project with no
`specPaths`, and empty `adminPaths`, restrict nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping
from typing import Any

from policies.builtin.base import BuiltinPolicy, Violation
from policies.context import PolicyContext
from policies.findings import Severity


def _matches(file: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(file, pattern.removeprefix("./")) for pattern in patterns)


def check_isolation(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    projects = {p.name: p.spec.get("specPaths", []) for p in context.of_kind("Project")}
    admin_paths = [str(p) for p in params.get("adminPaths") or []]
    admin_kinds = set(params.get("adminKinds") or [])
    for subject in context.subjects.values():
        is_admin = subject.kind in admin_kinds or (
            subject.project is None and params.get("globalResourcesAreAdmin")
        )
        if is_admin and admin_paths and not _matches(subject.file, admin_paths):
            yield Violation(
                subject.address,
                ("metadata",),
                f"a {subject.kind} is an admin resource and may only be declared under "
                f"{', '.join(admin_paths)}, not in {subject.file}",
                key="admin-path",
            )
            continue
        allowed = projects.get(subject.project or "", [])
        if subject.project and allowed and not _matches(subject.file, allowed):
            yield Violation(
                subject.address,
                ("metadata", "project"),
                f"project {subject.project} may only declare resources under "
                f"{', '.join(allowed)}, not in {subject.file}",
                key="project-path",
            )


PROJECT_ISOLATION = BuiltinPolicy(
    id="project-isolation",
    name="Project isolation by spec path",
    severity=Severity.DENY,
    kinds=("Project", "ResourcePool", "Queue", "Quota", "Dataset", "Image", "TrainingJob"),
    check=check_isolation,
    parameters={
        "adminPaths": [],
        "adminKinds": ["Project", "ResourcePool", "Queue", "Quota"],
        "globalResourcesAreAdmin": True,
    },
    description="A resource of project P comes from a file matching P's specPaths; admin "
    "kinds (and global resources) come from a file matching adminPaths.",
)
