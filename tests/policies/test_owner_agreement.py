"""CODEOWNERS and tenancy agree (policies.owner_agreement): `validate` warns, at the
CODEOWNERS line (or the adminPaths setting), where the code host would let someone other
than the platform admins approve an admin path, or the admins alone a team's file.

Each case edits a copy of examples/platform, which itself agrees."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from trainform.policies.engine import tenancy_diagnostics
from trainform.policies.owner_agreement import CODE, codeowners_disagreements
from trainform.policies.trusted import PolicyConfigError, load_trusted
from trainform.specs import Diagnostic, load_specs

from tests.helpers import REPO

PLATFORM = REPO / "examples" / "platform"
POLICIES = ".policies/policies.yaml"
SHIPPED_ADMIN_PATHS = 'adminPaths: ["/platform/**", "/teams/*/quotas.yaml"]'
# What `teams/*/quotas.yaml` meant while `*` crossed `/`.
CROSSING = 'adminPaths: ["/platform/**", "teams/**/quotas.yaml"]'


def platform(tmp_path: Path, admin_paths: str = "", codeowners: str | None = "") -> Path:
    """A copy of examples/platform; `admin_paths` replaces its adminPaths setting, and
    `codeowners` is appended to its CODEOWNERS (None: no CODEOWNERS file)."""
    root = tmp_path / "platform"
    shutil.copytree(PLATFORM, root)
    if admin_paths:
        policies = (root / POLICIES).read_text(encoding="utf-8")
        assert SHIPPED_ADMIN_PATHS in policies
        (root / POLICIES).write_text(
            policies.replace(SHIPPED_ADMIN_PATHS, admin_paths), encoding="utf-8"
        )
    if codeowners is None:
        (root / "CODEOWNERS").unlink()
    elif codeowners:
        with (root / "CODEOWNERS").open("a", encoding="utf-8") as handle:
            handle.write(codeowners)
    return root


def warnings(root: Path, **settings: object) -> list[Diagnostic]:
    specs = load_specs(root)
    trusted = load_trusted(None, specs.config, specs.root)
    trusted.settings.setdefault("project-isolation", {}).update(settings)
    return [d for d in tenancy_diagnostics(specs, trusted) if d.code == CODE]


def line_of(root: Path, text: str) -> int:
    lines = (root / "CODEOWNERS").read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, start=1) if line.startswith(text))


def test_the_shipped_platform_agrees(tmp_path: Path) -> None:
    assert warnings(platform(tmp_path)) == []


def test_an_admin_path_crossing_team_folders_is_flagged_at_each_teams_line(
    tmp_path: Path,
) -> None:
    """`teams/**/quotas.yaml` is what `teams/*/quotas.yaml` meant when `*` crossed `/`:
    every team's teams/<team>/x/quotas.yaml would be admin, approved by the team."""
    root = platform(tmp_path, CROSSING)
    found = warnings(root)
    by_line = {
        d.location.line: d for d in found if d.location and d.location.file.endswith("CODEOWNERS")
    }
    for team, leads in [
        ("llm-pretrain", "@llm-pretrain-leads"),
        ("alignment", "@alignment-leads"),
        ("eval-team", "@eval-leads"),
    ]:
        line = line_of(root, f"/teams/{team}/")
        warning = by_line[line]
        assert warning.severity.value == "warning"
        assert warning.summary.startswith(f"CODEOWNERS line {line} (`/teams/{team}/ {leads}`)")
        example = f"a file such as teams/{team}/_/quotas.yaml"
        assert f"lets {leads} approve {example} alone" in warning.summary
        assert "adminPaths `teams/**/quotas.yaml`" in warning.summary
        assert "not the platform admins' (@ml-platform)" in warning.summary
    [unowned] = [d for d in found if "no CODEOWNERS line covers it" in d.summary]
    assert unowned.location is not None and unowned.location.file.endswith(POLICIES)
    policies = (root / POLICIES).read_text(encoding="utf-8").splitlines()
    assert policies[unowned.location.line - 1].strip() == CROSSING
    assert "a file such as teams/quotas.yaml is an admin path" in unowned.summary


def test_a_co_owner_of_an_admin_file_is_flagged_with_the_real_file(tmp_path: Path) -> None:
    root = platform(tmp_path, codeowners="/platform/evals.yaml @eval-leads @ml-platform\n")
    [warning] = warnings(root)
    assert warning.location is not None
    assert warning.location.line == line_of(root, "/platform/evals.yaml")
    assert "lets @eval-leads approve platform/evals.yaml alone" in warning.summary


def test_a_team_file_the_admins_alone_own_is_flagged(tmp_path: Path) -> None:
    root = platform(tmp_path, codeowners="/teams/**/quotas.yaml @ml-platform\n")
    [warning] = warnings(root)
    assert warning.location is not None
    assert warning.location.line == line_of(root, "/teams/**/quotas.yaml")
    assert "to the platform admins (@ml-platform), but tenancy treats it as project" in (
        warning.summary
    )
    assert "add it to adminPaths" in warning.detail


def test_explicit_admin_owners_are_what_codeowners_is_compared_with(tmp_path: Path) -> None:
    found = warnings(platform(tmp_path), adminOwners=["@platform-oncall"])
    assert found and all("lets @ml-platform approve" in d.summary for d in found)


def test_nothing_is_compared_without_a_codeowners_file(tmp_path: Path) -> None:
    assert warnings(platform(tmp_path, CROSSING, codeowners=None)) == []


def test_nothing_is_compared_with_isolation_disabled(tmp_path: Path) -> None:
    specs = load_specs(platform(tmp_path, CROSSING))
    trusted = load_trusted(None, specs.config, specs.root)
    assert [d for d in tenancy_diagnostics(specs, trusted) if d.code == CODE] != []
    trusted.disabled = frozenset({"project-isolation"})
    assert tenancy_diagnostics(specs, trusted) == []


def test_nothing_is_compared_without_admin_paths(tmp_path: Path) -> None:
    specs = load_specs(platform(tmp_path))
    owners = load_trusted(None, specs.config, specs.root).code_owners
    assert codeowners_disagreements(["platform/pools.yaml"], {}, {"adminPaths": []}, owners) == []


@pytest.mark.parametrize("pattern", ["quotas.yaml", "platform/", "*.yaml"])
def test_an_admin_path_matching_at_any_depth_is_refused(tmp_path: Path, pattern: str) -> None:
    root = platform(tmp_path, f'adminPaths: ["/platform/**", "{pattern}"]')
    specs = load_specs(root)
    expected = re.escape(f"adminPaths `{pattern}` matches at any depth")
    with pytest.raises(PolicyConfigError, match=expected):
        load_trusted(None, specs.config, specs.root)


def test_spec_paths_matching_at_any_depth_are_a_finding(tmp_path: Path) -> None:
    root = platform(tmp_path)
    projects = root / "platform" / "projects.yaml"
    text = projects.read_text(encoding="utf-8")
    projects.write_text(text.replace('["teams/alignment/**"]', '["alignment/"]'), encoding="utf-8")
    specs = load_specs(root)
    found = tenancy_diagnostics(specs, load_trusted(None, specs.config, specs.root))
    [finding] = [d for d in found if d.address == "Project/alignment"]
    assert finding.code == "project-isolation" and finding.severity.value == "error"
    assert "specPaths `alignment/` match at any depth" in finding.summary
    assert "write `/alignment/`" in finding.summary
