"""Path globs (policies.globs): GitHub's CODEOWNERS rules, one matcher for CODEOWNERS lines,
adminPaths and specPaths.

The table holds GitHub's documented examples; the properties compare the matcher with a
reference written segment by segment from the rules (no regular expressions), check that
`*` and `?` never cross a `/`, that every sample path matches its pattern, and that
CODEOWNERS, tenancy and review decide alike, on the shipped examples/platform included.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainform.policies.builtin.isolation import tenancy_violations
from trainform.policies.codeowners import CodeOwners, parse_code_owners
from trainform.policies.globs import GlobSet, compile_glob, is_anchored, sample_paths
from trainform.policies.trusted import load_trusted
from trainform.specs import load_specs

from tests.helpers import REPO

PROPERTIES = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PLATFORM = REPO / "examples" / "platform"


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        # GitHub's examples (docs: About code owners, "Example of a CODEOWNERS file").
        pytest.param("*.js", "src/app/main.js", True, id="extension-any-depth"),
        pytest.param("/build/logs/", "build/logs/a/b.log", True, id="anchored-folder-deep"),
        pytest.param("/build/logs/", "x/build/logs/a.log", False, id="anchored-folder-root"),
        pytest.param("docs/*", "docs/getting-started.md", True, id="star-direct-entry"),
        pytest.param("docs/*", "docs/build-app/troubleshooting.md", False, id="star-not-nested"),
        pytest.param("apps/", "deep/apps/x.js", True, id="folder-any-depth"),
        pytest.param("apps/", "apps", False, id="folder-not-itself"),
        pytest.param("**/logs", "deeply/nested/logs/x", True, id="globstar-logs"),
        pytest.param("/scripts/", "scripts/a/b.sh", True, id="scripts"),
        # The tenancy cases.
        pytest.param("teams/*/quotas.yaml", "teams/a/quotas.yaml", True, id="team-quotas"),
        pytest.param("teams/*/quotas.yaml", "teams/a/x/quotas.yaml", False, id="nested-1"),
        pytest.param("teams/*/quotas.yaml", "teams/a/x/y/quotas.yaml", False, id="nested-2"),
        pytest.param("teams/*/quotas.yaml", "x/teams/a/quotas.yaml", False, id="anchored"),
        pytest.param("/teams/*/quotas.yaml", "teams/a/quotas.yaml", True, id="slash-anchored"),
        pytest.param("teams/**/quotas.yaml", "teams/a/x/quotas.yaml", True, id="globstar"),
        pytest.param("teams/**/quotas.yaml", "teams/quotas.yaml", True, id="globstar-zero"),
        pytest.param("teams/a/**", "teams/a/x/y.yaml", True, id="below"),
        pytest.param("teams/a/**", "teams/a", False, id="below-not-itself"),
        pytest.param("teams/a/*", "teams/a/x/y.yaml", False, id="star-is-one-level"),
        pytest.param("platform", "platform/pools.yaml", True, id="name-covers-folder"),
        pytest.param("platform", "teams/a/platform/x.yaml", True, id="name-any-depth"),
        pytest.param("./platform/**", "platform/x.yaml", True, id="dot-slash"),
        pytest.param("t?ams/a/x", "teams/a/x", True, id="question"),
        pytest.param("a?b", "a/b", False, id="question-not-slash"),
        pytest.param("teams/[ab]/x", "teams/a/x", False, id="no-ranges"),
        pytest.param("teams/[ab]/x", "teams/[ab]/x", True, id="brackets-literal"),
        pytest.param("Teams/a/x", "teams/a/x", False, id="case-sensitive"),
        pytest.param("**", "any/thing", True, id="everything"),
        pytest.param("", "x", False, id="empty"),
        pytest.param("/", "x", False, id="root-only"),
    ],
)
def test_globs_match_as_github_documents_codeowners(pattern: str, path: str, matches: bool) -> None:
    assert compile_glob(pattern).matches(path) is matches
    owners = parse_code_owners(f"{pattern} @owner\n") if pattern.strip() else CodeOwners()
    assert (owners.owners_of(path) == ("@owner",)) is matches


def test_a_leading_slash_or_a_middle_one_anchors() -> None:
    assert [is_anchored(p) for p in ("/a", "a/b", "a/", "a", "**/a", "./a/b")] == [
        True, True, False, False, True, True,
    ]  # fmt: skip


# A reference matcher, written from the rules segment by segment.
def _segments_match(pattern: list[str], path: list[str]) -> bool:
    """Whole segments against whole segments; a last `**` takes at least one."""
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        least = 0 if rest else 1
        return any(_segments_match(rest, path[n:]) for n in range(least, len(path) + 1))
    if not path:
        return False
    if head == "*":
        ok = path[0] != ""
    else:
        ok = fnmatch.fnmatchcase(path[0], head.replace("[", "[[]"))
    return ok and _segments_match(rest, path[1:])


def reference(pattern: str, path: str) -> bool:
    """Does `pattern` match `path`, by the rules of policies.globs, without regexes."""
    text = pattern
    while text.startswith("./"):
        text = text[2:]
    if text.strip("/") == "":
        return False
    directory = text.endswith("/")
    anchored = text.startswith("/") or "/" in text.rstrip("/")
    segments = text.strip("/").split("/")
    if not anchored and segments != ["**"]:
        segments = ["**", *segments]
    lone_star = segments[-1] == "*"
    parts = path.split("/")
    # The pattern matches the path itself or a folder holding it.
    for size in range(1, len(parts) + 1):
        below = len(parts) - size
        if directory and below == 0:
            continue
        if not directory and lone_star and below > 0:
            continue
        if _segments_match(segments, parts[:size]):
            return True
    return False


SEGMENTS = st.sampled_from(["a", "b", "ab", "*", "**", "?", "a*", "*b", "?b", "[a]"])
NAMES = st.sampled_from(["a", "b", "ab", "ba", "bb", "[a]", "x.yaml"])
patterns = st.builds(
    lambda lead, segments, trail: lead + "/".join(segments) + trail,
    st.sampled_from(["", "/", "./"]),
    st.lists(SEGMENTS, min_size=1, max_size=4),
    st.sampled_from(["", "/"]),
)
paths = st.lists(NAMES, min_size=1, max_size=5).map("/".join)


@PROPERTIES
@given(patterns, paths)
def test_the_matcher_agrees_with_the_reference(pattern: str, path: str) -> None:
    assert compile_glob(pattern).matches(path) is reference(pattern, path)


@PROPERTIES
@given(patterns, paths)
def test_star_and_question_mark_never_cross_a_slash(pattern: str, path: str) -> None:
    """Without `**`, an anchored pattern of k segments matches only paths whose first k
    segments match it one by one (so no `*` or `?` took a `/`)."""
    if "**" in pattern or not is_anchored(pattern) or not compile_glob(pattern).matches(path):
        return
    segments = pattern.removeprefix("./").strip("/").split("/")
    parts = path.split("/")
    assert len(parts) >= len(segments)
    for segment, part in zip(segments, parts, strict=False):
        assert "/" not in part
        assert fnmatch.fnmatchcase(part, segment.replace("[", "[[]"))


@PROPERTIES
@given(patterns, st.lists(st.sampled_from(["teams", "a", "teams/a"]), max_size=3))
def test_every_sample_path_matches_its_pattern(pattern: str, fillers: list[str]) -> None:
    for path in sample_paths(pattern, fillers):
        assert compile_glob(pattern).matches(path), (pattern, path)


def _resource(kind: str, name: str, spec: Any = None) -> Any:
    return SimpleNamespace(kind=kind, name=name, project=None, document=SimpleNamespace(spec=spec))


@PROPERTIES
@given(patterns, paths)
def test_codeowners_tenancy_and_review_decide_alike(pattern: str, path: str) -> None:
    """A CODEOWNERS line, an admin path and a GlobSet of the same pattern cover the same
    files: a Queue in `path` is a tenancy finding exactly when the line does not own it."""
    owned = parse_code_owners(f"{pattern} @platform\n").owners_of(path) == ("@platform",)
    assert GlobSet([pattern]).matches(path) is owned
    tenant = _resource(
        "Project", "t", SimpleNamespace(spec_paths=["/teams/t/**"], owners=["t@example.com"])
    )
    entries = [
        ("Project/t", tenant, "platform/projects.yaml"),
        ("Queue/q", _resource("Queue", "q"), path),
    ]
    params = {
        "adminPaths": [pattern, "/platform/projects.yaml"],
        "adminKinds": ["Project", "Queue"],
    }
    found = [v.address for v in tenancy_violations(entries, params, CodeOwners())]
    assert ("Queue/q" in found) is not (owned or path == "platform/projects.yaml")


TEAMS = ("alignment", "eval-team", "llm-pretrain")
FOLDERS = st.lists(st.sampled_from(["x", "y", "quotas.yaml", "teams", "alignment"]), max_size=3)
FILES = st.sampled_from(["quotas.yaml", "jobs.yaml", "evals.yaml"])


@pytest.fixture(scope="module")
def shipped() -> tuple[GlobSet, CodeOwners]:
    specs = load_specs(PLATFORM)
    trusted = load_trusted(None, specs.config, specs.root)
    return GlobSet(trusted.parameters_of("project-isolation")["adminPaths"]), trusted.code_owners


@settings(PROPERTIES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(TEAMS), FOLDERS, FILES)
def test_shipped_platform_admin_paths_are_the_files_codeowners_gives_the_platform(
    shipped: tuple[GlobSet, CodeOwners], team: str, folders: list[str], file: str
) -> None:
    admin, owners = shipped
    path = "/".join(["teams", team, *folders, file])
    platform_owned = owners.owners_of(path) == ("@ml-platform",)
    assert admin.matches(path) is platform_owned, path
    # The quotas.yaml directly in the team folder (and, were it a folder, what is in it).
    directly = (not folders and file == "quotas.yaml") or folders[:1] == ["quotas.yaml"]
    assert platform_owned is directly, path


def test_the_examples_codeowners_file_is_the_one_read(shipped: tuple[GlobSet, CodeOwners]) -> None:
    _, owners = shipped
    assert Path(owners.source).name == "CODEOWNERS"
    assert owners.owners_of("teams/alignment/x/quotas.yaml") == ("@alignment-leads",)
    assert owners.owners_of("platform/evals.yaml") == ("@ml-platform",)


@PROPERTIES
@given(st.lists(patterns, min_size=1, max_size=6), paths)
def test_the_last_matching_codeowners_line_decides(lines: list[str], path: str) -> None:
    owners = parse_code_owners("".join(f"{p} @o{n}\n" for n, p in enumerate(lines)))
    expected = next((r for r in reversed(owners.rules) if r.glob.matches(path)), None)
    assert owners.rule_for(path) == expected
