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

Paths are globs relative to the spec folder, matched by policies.globs exactly as the
code host matches CODEOWNERS lines: `*` stays within one path segment (`teams/*/quotas.yaml`
covers teams/a/quotas.yaml, never teams/a/x/quotas.yaml), `**` crosses segments, a pattern
with a `/` at its start or middle is anchored at the root. A `specPaths` pattern that is not
anchored (`jobs.yaml`, `team-a/`: it would match at any depth, inside other teams' folders
too) is a finding at the Project, and so `**` alone is the only pattern matching anywhere.
The check is linear: a file is matched once against the admin paths and once per project it
declares documents of, whatever the number of documents in it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.codeowners import CodeOwners
from trainform.policies.context import PolicyContext
from trainform.policies.findings import Severity
from trainform.policies.globs import GLOBSTAR, GlobSet, compile_glob, is_anchored, probe_path
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
    pattern: GlobSet


_WILD = re.compile(r"[*?]")


def _compile(patterns: Iterable[str]) -> GlobSet | None:
    globs = GlobSet(patterns)
    return globs if globs else None


def unanchored(patterns: Iterable[str]) -> list[str]:
    """The patterns that match at any depth without saying so (`jobs.yaml`, `team-a/`): in
    CODEOWNERS terms, those with no `/` but a trailing one, other than `**` itself."""
    return [
        p for p in patterns if not is_anchored(p) and p.strip().strip("/") not in (GLOBSTAR, "")
    ]


def admin_file(params: Mapping[str, Any], name: str) -> str | None:
    """A new file `name` placed where tenancy accepts platform kinds: in the folder of
    the first `adminPaths` pattern that names a folder (`platform/**` or `/platform/` ->
    `platform/NAME`) and matches the result; None without such a pattern."""
    for pattern in [str(p) for p in params.get("adminPaths") or []]:
        written = pattern.strip().removeprefix("./").lstrip("/")
        parts = (written + GLOBSTAR if written.endswith("/") else written).split("/")
        literal = list(itertools.takewhile(lambda part: not _WILD.search(part), parts))
        if not literal or len(literal) == len(parts):
            continue
        candidate = "/".join([*literal, name])
        if compile_glob(pattern).matches(candidate):
            return candidate
    return None


def _approval(who: str, owners: Iterable[str]) -> str:
    listed = ", ".join(owners)
    return f"needs approval of {who}: {listed}" if listed else f"needs approval of {who}"


def admin_owners(params: Mapping[str, Any], owners: CodeOwners) -> tuple[str, ...]:
    """The platform admins: `adminOwners` when set, else the owners CODEOWNERS gives each
    admin path (asked about as its plainest path: `platform/**` as `platform/_`)."""
    explicit = tuple(str(o) for o in params.get("adminOwners") or [])
    if explicit:
        return explicit
    found: list[str] = []
    for path in params.get("adminPaths") or []:
        found += [o for o in owners.owners_of(probe_path(str(path))) if o not in found]
    return tuple(found)


def _admin_approval(params: Mapping[str, Any], owners: CodeOwners) -> str:
    found = admin_owners(params, owners)
    if params.get("adminOwners"):
        return _approval("the platform admins", found)
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


class _Tenancy:
    """One run of the check: the admin paths, the tenants the Projects under them declare,
    and what has been matched so far (each file once against the admin paths, once per
    project it declares documents of)."""

    def __init__(
        self, declared: list[Entry], params: Mapping[str, Any], owners: CodeOwners
    ) -> None:
        self.params = params
        self.owners = owners
        self.admin_paths = [str(p) for p in params.get("adminPaths") or []]
        self.admin_pattern = _compile(self.admin_paths)
        self.admin_files: dict[str, bool] = {}
        self.tenants = _tenants(declared, self.is_admin_file)
        self.by_name = {tenant.name: tenant for tenant in self.tenants}
        self.admin_kinds = set(params.get("adminKinds") or [])
        if params.get("delegateQuotas"):
            self.admin_kinds.discard("Quota")
        self.global_is_admin = bool(params.get("globalResourcesAreAdmin"))
        self.at_home: dict[tuple[str, str], bool] = {}
        self.covering: dict[str, tuple[str, ...]] = {}
        self.approval_of_admins = ""

    def is_admin_file(self, file: str) -> bool:
        if self.admin_pattern is None:
            return True  # unconfigured: every file counts as the platform's own
        if file not in self.admin_files:
            self.admin_files[file] = self.admin_pattern.matches(file)
        return self.admin_files[file]

    def admin_approval(self) -> str:
        if not self.approval_of_admins:
            self.approval_of_admins = _admin_approval(self.params, self.owners)
        return self.approval_of_admins

    def is_admin_document(self, resource: Resource) -> bool:
        return resource.kind in self.admin_kinds or (
            resource.project is None and self.global_is_admin
        )

    def is_at_home(self, project: str, file: str) -> bool:
        """Whether `file` is under the specPaths of `project` (matched once per pair)."""
        home = (file, project)
        if home not in self.at_home:
            own = self.by_name.get(project)
            self.at_home[home] = own is not None and own.pattern.matches(file)
        return self.at_home[home]

    def folders_holding(self, file: str) -> tuple[str, ...]:
        """The projects whose specPaths cover `file` (matched once per file)."""
        if file not in self.covering:
            self.covering[file] = tuple(t.name for t in self.tenants if t.pattern.matches(file))
        return self.covering[file]


def tenancy_violations(
    entries: Iterable[Entry], params: Mapping[str, Any], owners: CodeOwners
) -> Iterator[Violation]:
    """Every document declared where tenancy does not allow it (see the module docstring)."""
    entries = list(entries)
    declared = [entry for entry in entries if entry[1].kind == "Project"]
    tenancy = _Tenancy(declared, params, owners)
    if tenancy.admin_pattern is None and not tenancy.tenants:
        return
    if tenancy.admin_pattern is None:
        yield _unset_admin_paths(tenancy, declared)
    yield from _unanchored_spec_paths(tenancy, declared)
    projects = {
        resource.name: tuple(resource.document.spec.owners)  # type: ignore[attr-defined]
        for _, resource, _ in declared
    }
    for address, resource, file in entries:
        if tenancy.is_admin_document(resource):
            found = _platform_violation(tenancy, address, resource, file)
        else:
            found = _project_violation(tenancy, projects, address, resource, file)
        if found is not None:
            yield found


def _unset_admin_paths(tenancy: _Tenancy, declared: list[Entry]) -> Violation:
    """Tenancy is on (a Project declares specPaths) but nothing says where platform kinds
    may come from."""
    first = next(t for t in tenancy.tenants)
    address = next(a for a, resource, _ in declared if resource.name == first.name)
    return Violation(
        address,
        ("spec", "specPaths"),
        f"projects declare specPaths (tenancy is on) but project-isolation has no "
        f"adminPaths, so nothing says where platform kinds "
        f"({', '.join(sorted(tenancy.admin_kinds))})"
        f" may come from and any team folder could declare them: {WHERE_TO_SET}",
        key="admin-paths-unset",
    )


def _unanchored_spec_paths(tenancy: _Tenancy, declared: list[Entry]) -> Iterator[Violation]:
    """A tenant's specPaths pattern that matches at any depth: `jobs.yaml` would make
    teams/other/jobs.yaml this project's folder too, approved by the other team."""
    addresses = {resource.name: address for address, resource, _ in declared}
    for tenant in tenancy.tenants:
        loose = unanchored(tenant.paths)
        if not loose:
            continue
        written = ", ".join(f"`{p}`" for p in loose)
        anchored = ", ".join(f"`/{p.strip().removeprefix('./')}`" for p in loose)
        yield Violation(
            addresses[tenant.name],
            ("spec", "specPaths"),
            f"project {tenant.name}'s specPaths {written} match at any depth (as in "
            f"CODEOWNERS, a pattern without a `/` at its start or middle is not anchored), "
            f"so they cover files inside other teams' folders too: write {anchored} for the "
            "folder at the root, or `**/...` if every depth is meant",
            key="spec-paths-unanchored",
        )


def _platform_violation(
    tenancy: _Tenancy, address: str, resource: Resource, file: str
) -> Violation | None:
    """A platform kind or global resource declared outside the admin paths."""
    if tenancy.admin_pattern is None or tenancy.is_admin_file(file):
        return None
    kind = resource.kind
    admin_approval = tenancy.admin_approval()
    what = (
        f"a {kind} is a platform kind"
        if kind in tenancy.admin_kinds
        else f"a global {kind} (no metadata.project) is a platform resource"
    )
    return Violation(
        address,
        ("kind",) if kind in tenancy.admin_kinds else ("metadata",),
        f"{file} declares {address}, but {what} and may only be "
        f"declared under adminPaths ({', '.join(tenancy.admin_paths)}): declare it there, "
        f"which {admin_approval}",
        key="admin-path",
    )


def _project_violation(
    tenancy: _Tenancy,
    projects: Mapping[str, tuple[str, ...]],
    address: str,
    resource: Resource,
    file: str,
) -> Violation | None:
    """A project's document outside its project's specPaths: in another team's folder, or
    in a file no specPaths and no admin paths cover."""
    project = resource.project
    if project is None or (tenancy.admin_pattern is not None and tenancy.is_admin_file(file)):
        return None
    if tenancy.is_at_home(project, file):
        return None
    folder_of = tenancy.folders_holding(file)
    own = tenancy.by_name.get(project)
    if own is not None:
        remedy = f"declare it under {project}'s specPaths ({', '.join(own.paths)})"
        approval = _approval(f"project {project}'s owners", projects.get(project, ()))
    else:
        remedy = f"declare it under adminPaths (project {project} has no specPaths)"
        approval = tenancy.admin_approval()
    if folder_of:
        owner = tenancy.by_name[folder_of[0]]
        return Violation(
            address,
            ("metadata", "project"),
            f"{file} is in the folder of project {owner.name} (specPaths "
            f"{', '.join(owner.paths)}) but {address} belongs to project "
            f"{project}: a team folder declares nothing for another project; {remedy}, "
            f"which {approval}",
            key="cross-tenant",
        )
    if tenancy.admin_pattern is not None and tenancy.tenants:
        return Violation(
            address,
            ("metadata", "project"),
            f"{file} is covered by no project's specPaths and by no adminPaths "
            f"({', '.join(tenancy.admin_paths)}), yet declares {address} of project "
            f"{project}; {remedy}, which {approval}",
            key="project-path",
        )
    return None


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
