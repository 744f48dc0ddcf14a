"""`trainform review` end to end: a fixture repository (git init, a base commit, a pull
request on top), the installed console script, golden Markdown, exit codes 0, 1 and 3."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.engine.support import run_trainform
from tests.policies.review.fixture import (
    POOL,
    TRUSTED_SETTINGS,
    commit,
    make_repository,
    queues,
)
from tests.test_golden import check_golden

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "review"


def review(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_trainform("review", "repo", "--base", "HEAD~1", *args, cwd=cwd)


def row(markdown: str, first: str) -> list[str]:
    """Cells of the first table row whose first cell is `first`, after `heading`."""
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r}")


def section(markdown: str, title: str) -> str:
    start = markdown.index(title)
    return markdown[start : markdown.find("\n#### ", start + 1) % (len(markdown) + 1)]


def test_moving_eight_gpus_shows_who_gains_and_who_loses(moved: Path, update_golden: bool) -> None:
    result = review(moved, "--head", "HEAD", "--trace", "trace.csv", "--format", "markdown")
    assert result.returncode == 0, result.stderr
    markdown = result.stdout
    check_golden(GOLDEN / "move-8-gpus.md", markdown, update_golden)

    gains = section(markdown, "Who gains, who loses")
    assert row(gains, "team-a")[1:4] == ["32", "24", "-8"]
    assert row(gains, "team-b")[1:4] == ["32", "40", "+8"]
    waits = section(markdown, "Simulated wait per project")
    for team in ("team-a", "team-b"):
        cells = row(waits, team)
        # jobs, p50 base/head/delta, p95 base/head/delta
        assert len(cells) == 9 and all(cells[2:8]), cells
    assert row(waits, "team-a")[7].startswith("+"), "team-a waits longer at p95"
    assert row(waits, "team-b")[7].startswith("-"), "team-b waits less at p95"
    assert markdown.startswith("<!-- trainform-review -->\n### trainform review: allowed")
    first = markdown.split("#### Who gains")[0]
    assert "- `team-a` gpu gpu nominal 32 → 24 (-8)\n" in first
    assert "- `team-b` gpu gpu nominal 32 → 40 (+8)\n" in first
    assert "- `platform/queues.yaml`: CODEOWNERS: @ml-platform; platform admins: @ml-platform" in (
        section(markdown, "Approvals needed")
    )
    assert len(markdown) < 60_000


def test_json_report_holds_every_figure(moved: Path) -> None:
    result = review(moved, "--head", "HEAD", "--trace", "trace.csv", "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["formatVersion"] == 1 and report["verdict"] == "pass"
    projects = {side: report["capacity"][side]["projects"] for side in ("base", "head")}
    assert projects["base"]["team-a"]["guaranteed"] == 32
    assert projects["head"]["team-a"]["guaranteed"] == 24
    assert projects["head"]["team-b"]["guaranteed"] == 40
    waits = report["simulation"]["projects"]["team-a"]
    assert waits["head"]["p95"] > waits["base"]["p95"]
    assert [c["address"] for c in report["changes"]] == ["Queue/team-a", "Queue/team-b"]


def test_text_is_the_default_and_head_defaults_to_the_working_tree(moved: Path) -> None:
    queues_file = moved / "repo" / "platform" / "queues.yaml"
    queues_file.write_text(queues(24, 40), encoding="utf-8")  # uncommitted
    result = review(moved)
    assert result.returncode == 0, result.stderr
    assert "head working tree" in result.stdout
    assert "team-a gpu gpu nominal 32 → 24 (-8)" in result.stdout


def test_nominal_quota_beyond_pool_capacity_is_denied_with_file_and_line(tmp_path: Path) -> None:
    make_repository(tmp_path / "repo")
    commit(tmp_path / "repo", {"platform/queues.yaml": queues(48, 32)}, "team-a wants more")
    result = review(tmp_path, "--head", "HEAD", "--format", "markdown")
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith(
        "<!-- trainform-review -->\n### trainform review: DENIED by policy: 2 new deny findings"
    )
    findings = section(result.stdout, "Policy findings")
    assert "<details>" not in findings.split("\n")[0], "denials are shown, not folded"
    deny = row(findings, "new")
    assert deny[1:3] == ["deny", "pool-capacity"]
    assert re.fullmatch(r"repo/platform/queues\.yaml:\d+:\d+", deny[4]), deny


@pytest.mark.parametrize(
    "template",
    [
        pytest.param("{{ ''.__class__.__mro__ }}", id="mro"),
        pytest.param("{{ cycler.__init__.__globals__ }}", id="globals"),
        pytest.param("{{ self.__init__.__globals__.__builtins__ }}", id="builtins"),
    ],
)
def test_a_head_template_reaching_python_internals_is_a_template_error(
    tmp_path: Path, template: str
) -> None:
    make_repository(tmp_path / "repo")
    attack = queues(32, 32).replace("defaultPriority: 100", f'defaultPriority: "{template}"', 1)
    commit(tmp_path / "repo", {"platform/queues.yaml": attack}, "escape the sandbox")
    result = review(tmp_path, "--head", "HEAD")
    assert result.returncode == 1
    assert "the head specs (HEAD" in result.stderr
    assert "template-error" in result.stdout
    assert re.search(r"--> repo/platform/queues\.yaml:\d+:\d+", result.stdout), result.stdout
    assert "<class" not in result.stdout


def test_policies_are_never_read_from_the_head(tmp_path: Path) -> None:
    make_repository(tmp_path / "repo")
    rules = (
        "apiVersion: trainform/v1\nkind: PolicyConfig\n"
        "rules:\n  - {id: no-queues, severity: deny, kinds: [Queue], violation: 'true',"
        " message: every queue is denied}\n"
    )
    config = (tmp_path / "repo" / "trainform.yaml").read_text(encoding="utf-8")
    commit(
        tmp_path / "repo",
        {
            ".policies/policies.yaml": rules,
            "trainform.yaml": config.replace("policies:\n", "policies:\n  path: .policies\n"),
            "platform/queues.yaml": queues(24, 40),
        },
        "bring my own policies",
    )
    result = review(tmp_path, "--head", "HEAD", "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["policies"]["findings"] == []

    trusted = tmp_path / "trusted"
    trusted.mkdir()
    (trusted / "policies.yaml").write_text(rules + TRUSTED_SETTINGS, encoding="utf-8")
    result = review(tmp_path, "--head", "HEAD", "--policies", str(trusted), "--format", "json")
    assert result.returncode == 3
    assert {f["policy"] for f in json.loads(result.stdout)["policies"]["findings"]} == {"no-queues"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--head", "no-such-ref"], "cannot read ref 'no-such-ref'", id="bad-head"),
        pytest.param(["--base", "HEAD~9"], "cannot read ref 'HEAD~9'", id="bad-base"),
        pytest.param(
            ["--trace-from", "slurm"], "declares 0 slurm provider instances", id="no-slurm"
        ),
        pytest.param(
            ["--trace-from", "slurm:hpc"], "has no slurm provider instance 'hpc'", id="instance"
        ),
        pytest.param(
            ["--trace-from", "slurm", "--since", "--help"], "cannot read --since", id="since"
        ),
    ],
)
def test_errors_exit_1_with_a_message(
    moved: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = (
        ["review", "repo", *args]
        if "--base" in args
        else ["review", "repo", "--base", "HEAD~1", *args]
    )
    path = os.environ.get("PATH", "").split(os.pathsep)
    kept = moved / "git-only"
    kept.mkdir(exist_ok=True)
    git = shutil.which("git")
    assert git is not None
    (kept / "git").symlink_to(git)
    without_sacct = [p for p in path if not (Path(p) / "sacct").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join([str(kept), *without_sacct]))
    result = run_trainform(*argv, cwd=moved)
    assert result.returncode == 1, result.stdout
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_invalid_base_specs_name_the_base_side(tmp_path: Path) -> None:
    make_repository(tmp_path / "repo")
    commit(tmp_path / "repo", {"platform/pools.yaml": "kind: ResourcePool\n"}, "broken base")
    commit(tmp_path / "repo", {"platform/pools.yaml": POOL}, "fixed")
    result = review(tmp_path, "--head", "HEAD")
    assert result.returncode == 1
    assert "the base specs (HEAD~1" in result.stderr
    assert "repo/platform/pools.yaml:1:1" in result.stdout


def test_invalid_head_in_markdown_is_a_comment_with_fenced_diagnostics(tmp_path: Path) -> None:
    make_repository(tmp_path / "repo")
    commit(tmp_path / "repo", {"platform/queues.yaml": queues(32, 32) + "  colour: blue\n"}, "typo")
    result = review(tmp_path, "--head", "HEAD", "--format", "markdown")
    assert result.returncode == 1
    assert result.stdout.startswith("<!-- trainform-review -->\n### trainform review: ERROR\n")
    assert "```text\n" in result.stdout and "--> repo/platform/queues.yaml:26:3" in result.stdout
    assert result.stdout.rstrip().endswith("```")


def test_a_trusted_waiver_turns_the_denial_into_a_passing_review(tmp_path: Path) -> None:
    make_repository(tmp_path / "repo")
    commit(tmp_path / "repo", {"platform/queues.yaml": queues(48, 32)}, "team-a wants more")
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    (trusted / "policies.yaml").write_text(
        "apiVersion: trainform/v1\nkind: PolicyConfig\n" + TRUSTED_SETTINGS + "waivers:\n"
        "  - {policy: pool-capacity, address: Queue/team-a, reason: burst until March,"
        " expires: 2999-01-01}\n"
        "  - {policy: pool-capacity, address: Queue/team-b, reason: burst until March,"
        " expires: 2999-01-01}\n",
        encoding="utf-8",
    )
    result = review(tmp_path, "--head", "HEAD", "--policies", str(trusted), "--format", "markdown")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("<!-- trainform-review -->\n### trainform review: allowed")
    assert "2 new (0 deny, 0 warn, 2 waived)" in result.stdout
    waived = row(section(result.stdout, "Policy findings"), "new")
    assert waived[1:3] == ["waived", "pool-capacity"]
    assert waived[5].endswith("(waived: burst until March)")
