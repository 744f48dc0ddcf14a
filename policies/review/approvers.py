"""Who must approve a review's change: per changed file, its CODEOWNERS owners, the
platform admins when it lies under `adminPaths`, and the owners of the Project whose
`specPaths` cover it.

Everything comes from trusted places: CODEOWNERS and the project-isolation settings from
the trusted policies (`--policies`, else the base ref), the Projects and their owners from
the base's specs, so a pull request cannot name its own approvers. Files are relative to
the spec folder, as CODEOWNERS patterns and `specPaths` are written, and every pattern is
matched by policies.globs, as the code host matches CODEOWNERS lines (`*` never crosses a
`/`), so the approvals named here and the code host's agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainform.policies.builtin.isolation import admin_owners
from trainform.policies.codeowners import CodeOwners
from trainform.policies.globs import GlobSet
from trainform.specs import SpecSet


@dataclass(frozen=True, slots=True)
class Approval:
    """The approvals one changed file needs: `who` names the group, `owners` its members."""

    file: str
    who: str
    owners: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "who": self.who, "owners": list(self.owners)}


def approvals_needed(
    files: Iterable[str], base: SpecSet, params: Mapping[str, Any], owners: CodeOwners
) -> list[Approval]:
    """The approvals of each file in `files` (relative to the spec folder), in file order."""
    projects = [
        (resource.name, GlobSet(spec.spec_paths), tuple(spec.owners))
        for resource in base.resources.values()
        if resource.kind == "Project"
        for spec in [resource.document.spec]  # type: ignore[attr-defined]
    ]
    admin_paths = GlobSet(params.get("adminPaths") or [])
    approvals: list[Approval] = []
    for file in sorted(set(files)):
        listed = owners.owners_of(file)
        if listed:
            approvals.append(Approval(file, "CODEOWNERS", listed))
        if admin_paths.matches(file):
            approvals.append(Approval(file, "platform admins", admin_owners(params, owners)))
        for name, paths, project_owners in projects:
            if paths.matches(file):
                approvals.append(Approval(file, f"project {name} owners", project_owners))
    return approvals
