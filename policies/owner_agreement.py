"""Whether CODEOWNERS and tenancy agree on who approves what: `validate`'s warnings where
the code host would let someone approve a file the policy judges otherwise.

Tenancy (policies.builtin.isolation) trusts a file under `adminPaths` to declare platform
kinds because the platform admins approve it; the code host decides who approves by the
CODEOWNERS line that matches it last. When the two disagree the trust is misplaced:

- `team-owns-admin-path`: a file under adminPaths that CODEOWNERS lets someone other than
  the platform admins approve (a team's leads, or a co-owner: any one owner of a line may
  approve alone), so platform kinds there need only their approval;
- `unowned-admin-path`: a file under adminPaths no CODEOWNERS line covers, which anyone
  with write access may approve;
- `admins-own-team-path`: a file in a project's folder, not under adminPaths, that
  CODEOWNERS gives to the platform admins alone, so what they approve there is denied.

The platform admins are `adminOwners`, else the owners CODEOWNERS gives the admin paths
(isolation.admin_owners, the same names the findings print). The files compared are the
spec files loaded and sample paths of every pattern involved (adminPaths, the tenants'
specPaths, each CODEOWNERS line; wildcards filled with `_` and with the folder names those
patterns spell, `**` with zero, one and two segments; at most MAX_SAMPLES), so a
disagreement shows before a pull request adds the file. All matching goes through
policies.globs, the matcher both sides use. Nothing runs without a CODEOWNERS file or
without adminPaths. Each warning is reported once per CODEOWNERS line (or admin pattern),
at that line, with one example file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainform.policies.builtin.isolation import ID as ISOLATION_ID
from trainform.policies.builtin.isolation import admin_owners
from trainform.policies.codeowners import CodeOwners, OwnerRule
from trainform.policies.globs import GlobSet, literal_prefixes, probe_path, sample_paths
from trainform.policies.trusted import POLICY_FILE, TrustedPolicies
from trainform.specs import Diagnostic, Location, SpecSet
from trainform.specs import Severity as DiagnosticSeverity

CODE = "codeowners-mismatch"
MAX_SAMPLES = 20_000
"""Sample paths compared at most (beyond the spec files), however large CODEOWNERS is."""


@dataclass(frozen=True)
class Disagreement:
    """One way CODEOWNERS and tenancy disagree, with one file showing it."""

    kind: str
    path: str
    real: bool
    """Whether `path` is a spec file of the folder (else a sample path of a pattern)."""
    rule: OwnerRule | None
    admin_pattern: str = ""
    project: str = ""
    owners: tuple[str, ...] = ()
    """The owners of `path` that make it a disagreement (outsiders, or the admins)."""


@dataclass(frozen=True)
class _Sides:
    """What both sides say: the admin paths, the platform admins, the project folders."""

    admin: GlobSet
    admins: frozenset[str]
    folders: dict[str, GlobSet]
    folder_owners: dict[str, frozenset[str]]


def _fillers(patterns: Iterable[str]) -> list[str]:
    """Folder names and paths the patterns spell (`teams`, `alignment`, `teams/alignment`),
    to fill other patterns' wildcards with."""
    found: list[str] = []
    for pattern in patterns:
        for prefix in literal_prefixes(pattern):
            found += [prefix, prefix.rsplit("/", 1)[-1]]
    return list(dict.fromkeys(found))


def _candidates(
    files: Iterable[str], sides: _Sides, projects: Mapping[str, tuple[str, ...]], owners: CodeOwners
) -> dict[str, bool]:
    """Paths to compare, real spec files first: path -> whether it is a spec file. Samples:
    of each admin path with the folder names every pattern spells; of each CODEOWNERS line
    with the project folders' names (where it might reach into a team folder); of each
    specPaths pattern as it is. At most MAX_SAMPLES of them."""
    spec_paths = [p for paths in projects.values() for p in paths]
    folders = _fillers(spec_paths)
    everything = _fillers([*(rule.pattern for rule in owners.rules), *sides.admin.patterns])
    sampled = [(pattern, [*folders, *everything]) for pattern in sides.admin.patterns]
    sampled += [(rule.pattern, folders) for rule in owners.rules]
    sampled += [(pattern, []) for pattern in spec_paths]
    found = dict.fromkeys(sorted(set(files)), True)
    budget = len(found) + MAX_SAMPLES
    for pattern, fillers in sampled:
        for path in sample_paths(pattern, fillers):
            if len(found) >= budget:
                return found
            found.setdefault(path, False)
    return found


def _judge(path: str, real: bool, sides: _Sides, owners: CodeOwners) -> Disagreement | None:
    rule = owners.rule_for(path)
    listed = rule.owners if rule is not None else ()
    admin_pattern = sides.admin.first_match(path)
    if admin_pattern is not None:
        if not listed:
            return Disagreement("unowned-admin-path", path, real, rule, admin_pattern)
        outsiders = tuple(o for o in listed if o not in sides.admins)
        if outsiders:
            kind = "team-owns-admin-path"
            return Disagreement(kind, path, real, rule, admin_pattern, owners=outsiders)
        return None
    if not listed or not set(listed) <= sides.admins:
        return None
    for project, folder in sides.folders.items():
        if folder.matches(path) and not sides.folder_owners[project] <= sides.admins:
            return Disagreement("admins-own-team-path", path, real, rule, "", project, listed)
    return None


def codeowners_disagreements(
    files: Iterable[str],
    projects: Mapping[str, tuple[str, ...]],
    params: Mapping[str, Any],
    owners: CodeOwners,
) -> list[Disagreement]:
    """Where CODEOWNERS and tenancy disagree (see the module docstring): `files` are the
    spec files relative to the spec folder, `projects` the tenants' specPaths, `params`
    project-isolation's. One per CODEOWNERS line (or admin pattern) and kind."""
    admin = GlobSet(params.get("adminPaths") or [])
    if not owners.source or not admin:
        return []
    sides = _Sides(
        admin,
        frozenset(admin_owners(params, owners)),
        {name: GlobSet(paths) for name, paths in projects.items()},
        {
            name: frozenset(owners.owners_of(probe_path(paths[0])))
            for name, paths in projects.items()
        },
    )
    found: dict[tuple[str, str], Disagreement] = {}
    for path, real in _candidates(files, sides, projects, owners).items():
        disagreement = _judge(path, real, sides, owners)
        if disagreement is None:
            continue
        rule = disagreement.rule
        where = str(rule.line) if rule is not None else disagreement.admin_pattern
        found.setdefault((disagreement.kind, where), disagreement)
    return list(found.values())


def _message(item: Disagreement, admins: Iterable[str]) -> tuple[str, str]:
    """The summary and the remedy of one disagreement."""
    admins_text = ", ".join(admins) or "none named"
    file = item.path if item.real else f"a file such as {item.path}"
    line = f"CODEOWNERS line {item.rule.line} (`{item.rule.describe()}`)" if item.rule else ""
    if item.kind == "unowned-admin-path":
        return (
            f"{file} is an admin path (adminPaths `{item.admin_pattern}`) but no CODEOWNERS "
            "line covers it, so anyone with write access may approve platform kinds there",
            "give it to the platform admins with a CODEOWNERS line, or narrow adminPaths",
        )
    if item.kind == "team-owns-admin-path":
        return (
            f"{line} lets {', '.join(item.owners)} approve {file} alone, but tenancy treats it "
            f"as an admin path (adminPaths `{item.admin_pattern}`): platform kinds declared "
            f"there would need only their approval, not the platform admins' ({admins_text})",
            "give such files to the platform admins alone with a later CODEOWNERS line, or "
            "narrow adminPaths so they are not admin paths (`*` never crosses a `/`: "
            "docs/policies.md, Path globs)",
        )
    return (
        f"{line} gives {file} to the platform admins ({', '.join(item.owners)}), but tenancy "
        f"treats it as project {item.project}'s folder, not an admin path: platform kinds "
        "the admins approve there are denied",
        f"add it to adminPaths, or give it to project {item.project}'s owners in CODEOWNERS",
    )


def _setting_location(trusted: TrustedPolicies, specs: SpecSet, pattern: str) -> Location | None:
    """Where `pattern` is written in the trusted policies (policies.yaml, else
    trainform.yaml): the first line holding it."""
    places = [trusted.source] if trusted.source.endswith(POLICY_FILE) else []
    places.append(os.path.join(str(specs.root), "trainform.yaml"))
    for place in places:
        try:
            lines = Path(place).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for number, text in enumerate(lines, start=1):
            if "adminPaths" in text and pattern in text:
                return Location(place, number, text.index(pattern) + 1)
    return None


def agreement_diagnostics(
    specs: SpecSet,
    trusted: TrustedPolicies,
    files: Iterable[str],
    projects: Mapping[str, tuple[str, ...]],
) -> list[Diagnostic]:
    """`validate`'s warnings where CODEOWNERS and tenancy disagree; `files` relative to the
    spec folder, `projects` the tenants' specPaths."""
    if ISOLATION_ID in trusted.disabled:
        return []
    params = trusted.parameters_of(ISOLATION_ID)
    owners = trusted.code_owners
    admins = admin_owners(params, owners)
    diagnostics = []
    for item in codeowners_disagreements(files, projects, params, owners):
        summary, remedy = _message(item, admins)
        if item.rule is not None:
            location: Location | None = Location(owners.source, item.rule.line, 1)
        else:
            location = _setting_location(trusted, specs, item.admin_pattern)
        diagnostics.append(
            Diagnostic(
                severity=DiagnosticSeverity.WARNING,
                code=CODE,
                summary=summary,
                location=location,
                detail=remedy,
                related=(Location(owners.source, 1, 1),) if item.rule is None else (),
            )
        )
    return diagnostics
