"""Who must approve a review's change: per changed file, its CODEOWNERS owners, the
platform admins when it lies under `adminPaths`, and the owners of the Project whose
`specPaths` cover it.

Everything comes from trusted places: CODEOWNERS and the project-isolation settings from
the trusted policies (`--policies`, else the base ref), the Projects and their owners from
the base's specs, so a pull request cannot name its own approvers. Files are relative to
the spec folder, as CODEOWNERS patterns and `specPaths` are written.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainform.policies.codeowners import CodeOwners, probe_path
from trainform.specs import SpecSet


@dataclass(frozen=True, slots=True)
class Approval:
    """The approvals one changed file needs: `who` names the group, `owners` its members."""

    file: str
    who: str
    owners: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "who": self.who, "owners": list(self.owners)}


def _matches(file: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatch(file, str(p).removeprefix("./")) for p in patterns)


def _admin_owners(params: Mapping[str, Any], owners: CodeOwners) -> tuple[str, ...]:
    explicit = tuple(str(o) for o in params.get("adminOwners") or [])
    if explicit:
        return explicit
    found: list[str] = []
    for path in params.get("adminPaths") or []:
        found += [o for o in owners.owners_of(probe_path(str(path))) if o not in found]
    return tuple(found)


def approvals_needed(
    files: Iterable[str], base: SpecSet, params: Mapping[str, Any], owners: CodeOwners
) -> list[Approval]:
    """The approvals of each file in `files` (relative to the spec folder), in file order."""
    projects = [
        (resource.name, spec.spec_paths, tuple(spec.owners))
        for resource in base.resources.values()
        if resource.kind == "Project"
        for spec in [resource.document.spec]  # type: ignore[attr-defined]
    ]
    admin_paths = [str(p) for p in params.get("adminPaths") or []]
    approvals: list[Approval] = []
    for file in sorted(set(files)):
        listed = owners.owners_of(file)
        if listed:
            approvals.append(Approval(file, "CODEOWNERS", listed))
        if admin_paths and _matches(file, admin_paths):
            approvals.append(Approval(file, "platform admins", _admin_owners(params, owners)))
        for name, paths, project_owners in projects:
            if paths and _matches(file, paths):
                approvals.append(Approval(file, f"project {name} owners", project_owners))
    return approvals
