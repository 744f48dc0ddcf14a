"""The audit trail: every apply, destroy and force-unlock leaves a record of who and what
(a state-changing command a `started` and a `completed` one).

Runs the CLI on a small local platform inside a Git repository, with CI variables set the
way GitHub Actions sets them, and reads the records back with `trainform state audit`;
the S3 backend keeps the same records as objects in the state bucket.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from trainform.planner.backends.s3 import S3Backend
from trainform.specs.models.config import ObjectStoreConnection

from tests.helpers import CONFIG, PROJECT, run_cli, write_tree
from tests.services.s3 import S3Server

CI = {"GITHUB_RUN_ID": "4242", "GITHUB_REPOSITORY": "org/platform", "GITHUB_ACTOR": "octo"}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def records(root: Path, *args: str) -> list[dict]:
    listed = run_cli("state", "audit", str(root), "--format", "json", *args)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)["records"]


def test_apply_of_a_saved_plan_records_who_what_and_each_outcome(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG, "platform.yaml": PROJECT})
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    commit = git(root, "rev-parse", "HEAD")
    assert run_cli("plan", str(root), "-out", str(tmp_path / "p.plan")).returncode == 0

    applied = run_cli("apply", str(tmp_path / "p.plan"), env=CI)

    assert applied.returncode == 0, applied.stderr
    started, record = records(root)
    assert started["phase"] == "started" and started["operation"] == "apply"
    assert record["phase"] == "completed" and record["started"] == started["sequence"]
    assert record["outcome"] == "succeeded"
    assert record["operation"] == "apply"
    assert record["who"]["gitAuthor"] == "t <t@example.com>"
    assert record["who"]["ci"] == {
        "githubRunId": "4242",
        "githubRepository": "org/platform",
        "githubActor": "octo",
    }
    assert record["specCommit"] == commit
    plan_bytes = (tmp_path / "p.plan").read_bytes()
    assert record["planDigest"] == "sha256:" + hashlib.sha256(plan_bytes).hexdigest()
    assert record["changes"] == [
        {"address": "Project/research", "action": "create", "outcome": "applied"}
    ]
    assert record["state"]["serialAfter"] > record["state"]["serialBefore"]
    text = run_cli("state", "audit", str(root))
    assert "apply" in text.stdout and "(CI run 4242)" in text.stdout
    assert f"commit {commit[:12]}" in text.stdout


def test_destroy_and_force_unlock_are_recorded_and_since_filters(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG, "platform.yaml": PROJECT})
    assert run_cli("apply", str(root), "--auto-approve").returncode == 0
    assert run_cli("destroy", str(root), "--auto-approve").returncode == 0
    lock = root / ".trainform" / "state.json.lock"
    lock.write_text(
        json.dumps(
            {
                "id": "dead-1",
                "holder": "ci",
                "host": "gone",
                "pid": 1,
                "operation": "apply",
                "time": "2026-01-01T00:00:00Z",
            }
        )
    )
    assert run_cli("force-unlock", "dead-1", str(root)).returncode == 0

    operations = [r["operation"] for r in records(root)]
    assert operations == ["apply", "apply", "destroy", "destroy", "force-unlock"]
    assert records(root)[-1]["lock"]["id"] == "dead-1"
    assert records(root, "--since", "2999-01-01") == []
    assert [r["operation"] for r in records(root, "--command", "destroy")] == ["destroy"] * 2
    assert records(root, "--who", "nobody-of-that-name") == []
    table = run_cli("state", "audit", str(root), "--command", "force-unlock").stdout.splitlines()
    assert table[0].split() == ["TIME", "COMMAND", "PHASE", "WHO", "ENV", "CHANGES", "DETAILS"]
    assert len(table) == 2 and table[1].index("force-unlock") == table[0].index("COMMAND")
    bad = run_cli("state", "audit", str(root), "--since", "yesterday")
    assert bad.returncode != 0 and "not a UTC date" in bad.stderr


def test_the_s3_backend_keeps_audit_records_as_objects(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket()
    connection = ObjectStoreConnection(
        endpoint_url=s3_env.endpoint, region="us-east-1", addressing_style="path"
    )
    backend = S3Backend(bucket, "team/state.json", connection)
    backend.append_audit({"time": "2026-12-01T00:00:01Z", "operation": "apply"})
    backend.append_audit({"time": "2026-12-01T00:00:02Z", "operation": "destroy"})

    again = S3Backend(bucket, "team/state.json", connection)
    assert [r["operation"] for r in again.read_audit()] == ["apply", "destroy"]
    assert [r["sequence"] for r in again.read_audit()] == [1, 2]
    assert again.verify_audit().intact
