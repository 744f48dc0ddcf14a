"""The pull-request comment (`review --format markdown`): the change first, findings as a
diff against the base, a one-line comment when no queue policy changes, the hidden marker.
Golden files in tests/golden/review/ (`--update-golden` rewrites them)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.policies.review.fixture import commit, make_repository, queues
from tests.policies.review.test_cli_review import GOLDEN, review, row, section
from tests.test_golden import check_golden

MARKER = "<!-- trainform-review -->"


def test_a_quota_cut_is_denied_first_line_names_the_new_finding(
    tmp_path: Path, update_golden: bool
) -> None:
    make_repository(tmp_path / "repo")
    commit(tmp_path / "repo", {"platform/queues.yaml": queues(16, 32)}, "cut team-a to 16")
    result = review(tmp_path, "--head", "HEAD", "--format", "markdown")
    assert result.returncode == 3, result.stdout + result.stderr
    check_golden(GOLDEN / "quota-cut.md", result.stdout, update_golden)
    lines = result.stdout.splitlines()
    assert lines[0] == MARKER
    assert lines[1] == (
        "### trainform review: DENIED by policy: 1 new deny finding: "
        "`quota-cut` on `Queue/team-a`"
    )
    assert lines[5:8] == ["#### Queue-policy changes (1)", "", "- `team-a` gpu gpu nominal "
                          "32 → 16 (-16)"]  # fmt: skip
    new = row(section(result.stdout, "Policy findings"), "new")
    assert new[1:4] == ["deny", "quota-cut", "Queue/team-a"]
    assert "drops from 32 to 16 (50%)" in new[5]


def test_a_change_without_queue_policy_gets_one_line(tmp_path: Path, update_golden: bool) -> None:
    make_repository(tmp_path / "repo")
    commit(tmp_path / "repo", {"README.md": "# platform specs\n"}, "docs only")
    result = review(tmp_path, "--head", "HEAD", "--format", "markdown")
    assert result.returncode == 0, result.stderr
    check_golden(GOLDEN / "no-queue-policy-change.md", result.stdout, update_golden)
    assert result.stdout.count("\n") == 1 and result.stdout.startswith(MARKER + " ")
    assert "no queue-policy change" in result.stdout


def test_findings_are_a_diff_new_present_fixed_by_fingerprint(tmp_path: Path) -> None:
    make_repository(tmp_path / "repo")
    # The base already over-commits the pool: pool-capacity denies both queues.
    commit(tmp_path / "repo", {"platform/queues.yaml": queues(48, 32)}, "over-commit")
    commit(tmp_path / "repo", {"platform/queues.yaml": queues(48, 40)}, "more for team-b")
    present = review(tmp_path, "--head", "HEAD", "--format", "json")
    assert present.returncode == 3, present.stderr
    findings = json.loads(present.stdout)["policies"]
    assert {(f["status"], f["policy"]) for f in findings["findings"]} == {
        ("present", "pool-capacity")
    }
    text = review(tmp_path, "--head", "HEAD")
    assert "DENIED by policy: 2 deny findings already on the base" in text.stdout
    assert "none new" in text.stdout

    # Fix the over-commit and cut team-b by 60% in one change: two fixed, one new.
    commit(tmp_path / "repo", {"platform/queues.yaml": queues(48, 16)}, "cut team-b")
    mixed = json.loads(review(tmp_path, "--head", "HEAD", "--format", "json").stdout)
    statuses = sorted((f["status"], f["policy"]) for f in mixed["policies"]["findings"])
    assert statuses == [("new", "quota-cut")]
    fixed = mixed["policies"]["fixed"]
    assert sorted(f["address"] for f in fixed) == ["Queue/team-a", "Queue/team-b"]
    assert {f["policy"] for f in fixed} == {"pool-capacity"}


def test_a_trace_naming_unknown_queues_is_an_error_listing_them(
    moved: Path, update_golden: bool
) -> None:
    trace = moved / "trace.csv"
    text = trace.read_text(encoding="utf-8")
    renamed = text.replace(",team-a,team-a,", ",team-a,research-a,")
    (moved / "renamed.csv").write_text(renamed.replace(",team-b,team-b,", ",team-b,teamb,"))
    args = ("--head", "HEAD", "--trace", "renamed.csv")
    result = review(moved, *args, "--format", "markdown")
    assert result.returncode == 1
    check_golden(GOLDEN / "unknown-queues.md", result.stdout, update_golden)
    assert "unknown queue `research-a` (1218 jobs)" in result.stderr
    assert "unknown queue `teamb` (782 jobs); did you mean `team-b`?" in result.stderr

    # Mapped explicitly, the same trace gives the same figures as the original one.
    mapped = review(
        moved, *args, "--map-queue", "research-a=team-a", "--map-queue", "teamb=team-b",
        "--format", "json",
    )  # fmt: skip
    original = review(moved, "--head", "HEAD", "--trace", "trace.csv", "--format", "json")
    assert mapped.returncode == original.returncode == 0, mapped.stderr
    figures = [json.loads(r.stdout)["simulation"]["projects"] for r in (mapped, original)]
    assert figures[0] == figures[1]
    bad = review(moved, *args, "--map-queue", "teamb")
    assert bad.returncode == 1 and "expected TRACE_NAME=SPEC_NAME" in bad.stderr
