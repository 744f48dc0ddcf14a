"""Project isolation (tenancy): a project's documents come only from its own `specPaths`;
platform kinds only from the `adminPaths` of the trusted policies.

Tenancy is on as soon as one Project declares `specPaths`. Then:

- platform kinds (`adminKinds`: Project, ResourcePool, Queue, and Quota unless
  `delegateQuotas`), and global resources with `globalResourcesAreAdmin`, must come from a
  file matching `adminPaths`; with no `adminPaths` at all that is a finding of its own
  (an unconfigured tenancy is not an open one);
- a project-scoped document in a file that some project's `specPaths` cover must name
  that project (a team folder declares nothing for another team);
- a project-scoped document in a file no project's `specPaths` and no `adminPaths` cover
  is a finding too.

Only Projects declared under `adminPaths` define who owns which folder, so a Project added
from a team folder (itself denied) cannot claim more. Every finding names the document and
the approval it needs: for platform documents the platform admins (`adminOwners`, else the
trusted CODEOWNERS owners of the admin paths), for project documents the owning Project's
`owners`.

Paths are globs relative to the spec folder, matched like `fnmatch` (`*` also matches `/`,
so `teams/a/**` and `teams/a/*` both cover everything below teams/a). The check is linear:
a file is matched once against the admin paths and once per project it declares documents
of, whatever the number of documents in it.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.codeowners import CodeOwners, probe_path
from trainform.policies.context import PolicyContext
from trainform.policies.findings import Severity
from trainform.specs import Resource

ID = "project-isolation"
DEFAULT_ADMIN_KINDS = ["Project", "ResourcePool", "Queue", "Quota"]
WHERE_TO_SET = (
    "set it in the trusted policies.yaml (`settings: {project-isolation: {adminPaths: "
    '["platform/**"]}}`, read with --policies from the base branch in CI) or, for local '
    "use, in trainform.yaml `policies.settings`"
)


Entry = tuple[str, Resource, str]
"""What the check reads of a resource: its address, the resource, its file (relative)."""


@dataclass(frozen=True)
class _Tenant:
    name: str
    paths: tuple[str, ...]
    owners: tuple[str, ...]
    pattern: re.Pattern[str]


_WILD = re.compile(r"[*?\[]")


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    cleaned = [p.removeprefix("./") for p in patterns]
    if not cleaned:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in cleaned))


def admin_file(params: Mapping[str, Any], name: str) -> str | None:
    """A new file `name` placed where tenancy accepts platform kinds: in the folder of
    the first `adminPaths` pattern that names a folder (`platform/**` ->
    `platform/NAME`) and matches the result; None without such a pattern."""
    for pattern in [str(p).removeprefix("./") for p in params.get("adminPaths") or []]:
        parts = pattern.split("/")
        literal = list(itertools.takewhile(lambda part: not _WILD.search(part), parts))
        if not literal or len(literal) == len(parts):
            continue
        candidate = "/".join([*literal, name])
        compiled = _compile([pattern])
        if compiled is not None and compiled.match(candidate):
            return candidate
    return None


def _approval(who: str, owners: Iterable[str]) -> str:
    listed = ", ".join(owners)
    return f"needs approval of {who}: {listed}" if listed else f"needs approval of {who}"


def _admin_approval(params: Mapping[str, Any], owners: CodeOwners, paths: list[str]) -> str:
    explicit = [str(o) for o in params.get("adminOwners") or []]
    if explicit:
        return _approval("the platform admins", explicit)
    found: list[str] = []
    for path in paths:
        found += [o for o in owners.owners_of(probe_path(path)) if o not in found]
    if found:
        return _approval("the platform admins", found) + " (CODEOWNERS of the admin paths)"
    return "needs approval of the platform admins (adminPaths owners)"


def _tenants(projects: list[Entry], is_admin_file: Callable[[str], bool]) -> list[_Tenant]:
    tenants = []
    for _, resource, file in projects:
        spec = resource.document.spec  # type: ignore[attr-defined]
        if not spec.spec_paths or not is_admin_file(file):
            continue
        pattern = _compile(spec.spec_paths)
        assert pattern is not None
        tenants.append(_Tenant(resource.name, tuple(spec.spec_paths), tuple(spec.owners), pattern))
    return tenants


def tenancy_violations(
    entries: Iterable[Entry], params: Mapping[str, Any], owners: CodeOwners
) -> Iterator[Violation]:
    """Every document declared where tenancy does not allow it (see the module docstring)."""
    entries = list(entries)
    declared = [entry for entry in entries if entry[1].kind == "Project"]
    admin_paths = [str(p) for p in params.get("adminPaths") or []]
    admin_pattern = _compile(admin_paths)
    admin_files: dict[str, bool] = {}

    def is_admin_file(file: str) -> bool:
        if admin_pattern is None:
            return True  # unconfigured: every file counts as the platform's own
        if file not in admin_files:
            admin_files[file] = admin_pattern.match(file) is not None
        return admin_files[file]

    tenants = _tenants(declared, is_admin_file)
    if admin_pattern is None and not tenants:
        return
    admin_kinds = set(params.get("adminKinds") or [])
    if params.get("delegateQuotas"):
        admin_kinds.discard("Quota")
    if admin_pattern is None:
        first = next(t for t in tenants)
        address = next(a for a, resource, _ in declared if resource.name == first.name)
        yield Violation(
            address,
            ("spec", "specPaths"),
            f"projects declare specPaths (tenancy is on) but project-isolation has no "
            f"adminPaths, so nothing says where platform kinds ({', '.join(sorted(admin_kinds))})"
            f" may come from and any team folder could declare them: {WHERE_TO_SET}",
            key="admin-paths-unset",
        )
    by_name = {tenant.name: tenant for tenant in tenants}
    projects = {
        resource.name: tuple(resource.document.spec.owners)  # type: ignore[attr-defined]
        for _, resource, _ in declared
    }
    at_home: dict[tuple[str, str], bool] = {}
    covering: dict[str, tuple[str, ...]] = {}
    admin_approval = ""
    global_is_admin = bool(params.get("globalResourcesAreAdmin"))
    for address, resource, file in entries:
        kind, project = resource.kind, resource.project
        admin_document = kind in admin_kinds or (project is None and global_is_admin)
        if admin_document:
            if admin_pattern is not None and not is_admin_file(file):
                admin_approval = admin_approval or _admin_approval(params, owners, admin_paths)
                what = (
                    f"a {kind} is a platform kind"
                    if kind in admin_kinds
                    else f"a global {kind} (no metadata.project) is a platform resource"
                )
                yield Violation(
                    address,
                    ("kind",) if kind in admin_kinds else ("metadata",),
                    f"{file} declares {address}, but {what} and may only be "
                    f"declared under adminPaths ({', '.join(admin_paths)}): declare it there, "
                    f"which {admin_approval}",
                    key="admin-path",
                )
            continue
        if project is None or (admin_pattern is not None and is_admin_file(file)):
            continue
        own = by_name.get(project)
        home = (file, project)
        if home not in at_home:
            at_home[home] = own is not None and own.pattern.match(file) is not None
        if at_home[home]:
            continue
        # A finding: which projects' folders hold the file (once per file, findings only).
        if file not in covering:
            covering[file] = tuple(t.name for t in tenants if t.pattern.match(file) is not None)
        folder_of = covering[file]
        if own is not None:
            remedy = f"declare it under {project}'s specPaths ({', '.join(own.paths)})"
            approval = _approval(f"project {project}'s owners", projects.get(project, ()))
        else:
            remedy = f"declare it under adminPaths (project {project} has no specPaths)"
            admin_approval = admin_approval or _admin_approval(params, owners, admin_paths)
            approval = admin_approval
        if folder_of:
            owner = by_name[folder_of[0]]
            yield Violation(
                address,
                ("metadata", "project"),
                f"{file} is in the folder of project {owner.name} (specPaths "
                f"{', '.join(owner.paths)}) but {address} belongs to project "
                f"{project}: a team folder declares nothing for another project; {remedy}, "
                f"which {approval}",
                key="cross-tenant",
            )
        elif admin_pattern is not None and tenants:
            yield Violation(
                address,
                ("metadata", "project"),
                f"{file} is covered by no project's specPaths and by no adminPaths "
                f"({', '.join(admin_paths)}), yet declares {address} of project "
                f"{project}; {remedy}, which {approval}",
                key="project-path",
            )


def check_isolation(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    entries = ((s.address, s.resource, s.file) for s in context.subjects.values())
    return tenancy_violations(entries, params, context.code_owners)


PROJECT_ISOLATION = BuiltinPolicy(
    id=ID,
    name="Project isolation (tenancy)",
    severity=Severity.DENY,
    kinds=(
        "Project",
        "ResourcePool",
        "Queue",
        "Quota",
        "Dataset",
        "Image",
        "TrainingJob",
        "EvalSuite",
    ),
    check=check_isolation,
    parameters={
        "adminPaths": [],
        "adminKinds": DEFAULT_ADMIN_KINDS,
        "delegateQuotas": False,
        "globalResourcesAreAdmin": True,
        "adminOwners": [],
    },
    description="When projects declare specPaths: platform kinds (and global resources) come "
    "from a file matching adminPaths, which must be set; a project's resources from its own "
    "specPaths; a team folder declares nothing for another project.",
)
