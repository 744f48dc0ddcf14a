"""project-isolation (tenancy): admin paths, team folders, delegated quotas, owners named."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.policies.codeowners import find_code_owners, parse_code_owners, probe_path
from trainform.policies.engine import evaluate_policies, evaluate_tenancy, tenancy_diagnostics
from trainform.policies.trusted import PolicyConfigError, TrustedPolicies, load_trusted
from trainform.specs import load_specs

from tests.policies.support import CONFIG, DATASET, POOL, TODAY, evaluate, folder, of, queue

PROJECTS = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: team-a}
spec: {owners: [a-leads@example.com], specPaths: ["teams/team-a/**"]}
---
apiVersion: trainform/v1
kind: Project
metadata: {name: team-b}
spec: {owners: [b-leads@example.com, b2@example.com], specPaths: ["teams/team-b/**"]}
"""


def dataset(project: str, name: str = "notes") -> str:
    return (
        f"apiVersion: trainform/v1\nkind: Dataset\nmetadata: {{name: {name}, project: {project}}}\n"
        "spec: {source: s3://data/notes, format: jsonl, versions: [{name: v1}]}\n"
    )


def quota(project: str) -> str:
    return (
        f"apiVersion: trainform/v1\nkind: Quota\nmetadata: {{name: q, project: {project}}}\n"
        "spec: {queue: team-a, limits: {gpu: 512}}\n"
    )


BASE = {
    "platform/pool.yaml": POOL,
    "platform/projects.yaml": PROJECTS,
    "platform/data.yaml": DATASET,
    "platform/queues.yaml": queue("team-a", 8),
}
ADMIN = {"adminPaths": ["platform/**"]}


def tenancy(**values: object) -> TrustedPolicies:
    return TrustedPolicies(settings={"project-isolation": dict(values)})


def isolation(root: Path, trusted: TrustedPolicies) -> list[tuple[str, str, str]]:
    found = of(evaluate(root, trusted), "project-isolation")
    return [(f.address, f.location, f.message) for f in found]


def test_specpaths_without_admin_paths_is_a_finding_saying_where_to_set_them(
    tmp_path: Path,
) -> None:
    found = isolation(folder(tmp_path, BASE), TrustedPolicies())
    assert len(found) == 1
    address, location, message = found[0]
    assert address == "Project/team-a" and location.startswith("platform/projects.yaml:4:")
    assert "settings: {project-isolation: {adminPaths:" in message
    assert "trainform.yaml `policies.settings`" in message


def test_no_specpaths_and_no_admin_paths_restrict_nothing(tmp_path: Path) -> None:
    projects = PROJECTS.replace(', specPaths: ["teams/team-a/**"]', "").replace(
        ', specPaths: ["teams/team-b/**"]', ""
    )
    root = folder(
        tmp_path, {**BASE, "platform/projects.yaml": projects, "x/q.yaml": quota("team-a")}
    )
    assert isolation(root, TrustedPolicies()) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"teams/team-a/q.yaml": queue("grab", 0)},
            [("Queue/grab", "teams/team-a/q.yaml:2:", "a Queue is a platform kind")],
            id="queue-in-team-folder",
        ),
        pytest.param(
            {"teams/team-a/q.yaml": quota("team-a")},
            [("Quota/team-a/q", "teams/team-a/q.yaml:2:", "a Quota is a platform kind")],
            id="quota-in-team-folder",
        ),
        pytest.param(
            {"teams/team-a/d.yaml": dataset("team-b")},
            [
                (
                    "Dataset/team-b/notes",
                    "teams/team-a/d.yaml:3:",
                    "b-leads@example.com, b2@example.com",
                )
            ],
            id="another-projects-document",
        ),
        pytest.param(
            {"elsewhere/d.yaml": dataset("team-a")},
            [("Dataset/team-a/notes", "elsewhere/d.yaml:3:", "covered by no project")],
            id="uncovered-file",
        ),
        pytest.param(
            {"teams/team-a/d.yaml": DATASET.replace("corpus", "shared")},
            [("Dataset/shared", "teams/team-a/d.yaml:", "a global Dataset")],
            id="global-resource-in-team-folder",
        ),
        pytest.param({"teams/team-a/d.yaml": dataset("team-a")}, [], id="own-folder"),
        pytest.param({"platform/d.yaml": dataset("team-b")}, [], id="admins-declare-anything"),
    ],
)
def test_tenancy_findings(
    tmp_path: Path, files: dict[str, str], expected: list[tuple[str, str, str]]
) -> None:
    found = isolation(folder(tmp_path, {**BASE, **files}), tenancy(**ADMIN))
    assert len(found) == len(expected), found
    for (address, location, message), (want_address, want_location, want_text) in zip(
        found, expected, strict=True
    ):
        assert address == want_address
        assert location.startswith(want_location), location
        assert want_text in message


def test_another_projects_document_names_that_projects_owners(tmp_path: Path) -> None:
    root = folder(tmp_path, {**BASE, "teams/team-a/d.yaml": dataset("team-b")})
    [(_, _, message)] = isolation(root, tenancy(**ADMIN))
    assert "in the folder of project team-a" in message
    assert "declare it under team-b's specPaths (teams/team-b/**)" in message
    assert message.endswith(
        "needs approval of project team-b's owners: b-leads@example.com, b2@example.com"
    )


def test_delegated_quotas_may_come_from_the_projects_own_folder(tmp_path: Path) -> None:
    root = folder(tmp_path, {**BASE, "teams/team-a/q.yaml": quota("team-a")})
    assert isolation(root, tenancy(**ADMIN, delegateQuotas=True)) == []
    other = folder(tmp_path / "other", {**BASE, "teams/team-b/q.yaml": quota("team-a")})
    [(address, _, message)] = isolation(other, tenancy(**ADMIN, delegateQuotas=True))
    assert address == "Quota/team-a/q" and "in the folder of project team-b" in message


def test_a_project_declared_from_a_team_folder_claims_no_folder(tmp_path: Path) -> None:
    shadow = (
        "apiVersion: trainform/v1\nkind: Project\nmetadata: {name: shadow}\n"
        'spec: {owners: [me@example.com], specPaths: ["**"]}\n'
    )
    files = {"teams/team-a/p.yaml": shadow, "teams/team-a/d.yaml": dataset("shadow")}
    found = isolation(folder(tmp_path, {**BASE, **files}), tenancy(**ADMIN))
    assert [address for address, _, _ in found] == ["Dataset/shadow/notes", "Project/shadow"]


def test_admin_owners_come_from_codeowners_of_the_admin_paths(tmp_path: Path) -> None:
    root = folder(
        tmp_path,
        {
            **BASE,
            "teams/team-a/q.yaml": queue("grab", 0),
            "CODEOWNERS": "/platform/ @ml-platform\n/teams/team-a/ @team-a\n",
        },
    )
    specs = load_specs(root)
    trusted = load_trusted(None, specs.config, specs.root)
    trusted.settings["project-isolation"] = dict(ADMIN)
    [(_, _, message)] = isolation(root, trusted)
    assert message.endswith(
        "needs approval of the platform admins: @ml-platform (CODEOWNERS of the admin paths)"
    )
    explicit = tenancy(**ADMIN, adminOwners=["@platform-oncall"])
    [(_, _, message)] = isolation(root, explicit)
    assert message.endswith("needs approval of the platform admins: @platform-oncall")
    [(_, _, message)] = isolation(root, tenancy(**ADMIN))
    assert message.endswith("needs approval of the platform admins (adminPaths owners)")


def test_a_string_where_admin_paths_takes_a_list_is_an_error(tmp_path: Path) -> None:
    config = CONFIG + "policies:\n  settings:\n    project-isolation: {adminPaths: 'platform/**'}\n"
    root = folder(tmp_path, BASE)
    (root / "trainform.yaml").write_text(config, encoding="utf-8")
    specs = load_specs(root)
    with pytest.raises(PolicyConfigError, match="`adminPaths` must be a list"):
        load_trusted(None, specs.config, specs.root)


def test_validate_and_plan_see_the_same_tenancy_findings(tmp_path: Path) -> None:
    files = {
        "teams/team-a/q.yaml": queue("grab", 0) + "---\n" + dataset("team-b"),
        "elsewhere/d.yaml": dataset("team-a", "other"),
    }
    specs = load_specs(folder(tmp_path, {**BASE, **files}))
    trusted = tenancy(**ADMIN)
    full = of(evaluate_policies(specs, None, trusted, today=TODAY), "project-isolation")
    light = evaluate_tenancy(specs, trusted, today=TODAY).findings
    assert [(f.address, f.location, f.message) for f in light] == [
        (f.address, f.location, f.message) for f in full
    ]
    diagnostics = tenancy_diagnostics(specs, trusted, today=TODAY)
    assert len(diagnostics) == 3 and {d.severity.value for d in diagnostics} == {"error"}
    assert all(d.location is not None and d.location.line > 0 for d in diagnostics)


def test_disabled_or_warn_isolation_does_not_fail_validate(tmp_path: Path) -> None:
    specs = load_specs(folder(tmp_path, {**BASE, "teams/team-a/q.yaml": queue("grab", 0)}))
    off = TrustedPolicies(
        settings={"project-isolation": ADMIN}, disabled=frozenset({"project-isolation"})
    )
    assert tenancy_diagnostics(specs, off) == []
    warn = tenancy(**ADMIN, severity="warn")
    assert [d.severity.value for d in tenancy_diagnostics(specs, warn)] == ["warning"]


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("/platform/", "platform/pools.yaml", True),
        ("/platform/", "teams/platform/x.yaml", False),
        ("platform/", "platform/x/y.yaml", True),
        ("*.yaml", "teams/a/quotas.yaml", True),
        ("/teams/*/quotas.yaml", "teams/a/quotas.yaml", True),
        ("/teams/*/quotas.yaml", "teams/a/b/quotas.yaml", False),
        ("/teams/**/quotas.yaml", "teams/a/b/quotas.yaml", True),
        ("/trainform.yaml", "trainform.yaml", True),
        ("/docs", "docs/a.md", True),
        ("docs/*.md", "docs/a.md", True),
        ("docs/*.md", "x/docs/a.md", False),
    ],
)
def test_codeowners_patterns_match_as_code_hosts_do(pattern: str, path: str, matches: bool) -> None:
    owners = parse_code_owners(f"# comment\n{pattern} @owner\n")
    assert (owners.owners_of(path) == ("@owner",)) is matches


def test_the_last_matching_codeowners_line_wins() -> None:
    owners = parse_code_owners("/teams/a/ @a\n/teams/*/quotas.yaml @platform\n/teams/a/x @a @b\n")
    assert owners.owners_of("teams/a/quotas.yaml") == ("@platform",)
    assert owners.owners_of("teams/a/jobs.yaml") == ("@a",)
    assert owners.owners_of("teams/a/x") == ("@a", "@b")
    assert owners.owners_of("README.md") == ()
    assert owners.owners_of(probe_path("teams/*/quotas.yaml")) == ("@platform",)


def test_codeowners_is_found_where_code_hosts_look_and_never_through_a_symlink(
    tmp_path: Path,
) -> None:
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "CODEOWNERS").write_text("* @github\n", encoding="utf-8")
    (tmp_path / "CODEOWNERS").write_text("* @root\n", encoding="utf-8")
    assert find_code_owners([tmp_path]).owners_of("x") == ("@github",)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "CODEOWNERS").symlink_to(tmp_path / "CODEOWNERS")
    assert find_code_owners([elsewhere]).rules == ()
