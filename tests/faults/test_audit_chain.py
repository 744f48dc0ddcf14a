"""The audit trail is complete and tamper-evident.

Complete: `state rm`, `import` and an apply killed outright each leave records (a killed
run its `started` one, shown as never completed). Tamper-evident: editing, deleting or
inserting a record, cutting the newest off, or garbage in the trail is found by
`trainform state audit --verify` (exit 1, naming the record), locally and on S3 (moto and
SeaweedFS), where the object versions show rewrites and deletions too. A lost response to
an audit write is recognised as our own write.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainform.planner.audit_chain import record_digest
from trainform.planner.backends.s3 import S3Backend
from trainform.specs.models.config import ObjectStoreConnection

from tests.faults.s3_proxy import FaultProxy
from tests.faults.test_lock_fencing import SLOW_APPLY, project_folder
from tests.helpers import CONFIG, PROJECT, REPO, run_cli, write_tree
from tests.services.s3 import S3Server

KEY = "team/state.json"


def audited_folder(root: Path) -> Path:
    write_tree(root, {"trainform.yaml": CONFIG, "platform.yaml": PROJECT})
    assert run_cli("apply", str(root), "--auto-approve").returncode == 0
    assert run_cli("state", "rm", "Project/research", "--dir", str(root)).returncode == 0
    imported = run_cli("import", "Project/research", "Project/research", str(root))
    assert imported.returncode == 0, imported.stderr
    return root


def trail(root: Path) -> Path:
    return root / ".trainform" / "state.json.audit.jsonl"


def verify(root: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("state", "audit", str(root), "--verify")


def operations(root: Path) -> list[tuple[str, str]]:
    listed = run_cli("state", "audit", str(root), "--format", "json")
    return [(r["operation"], r["phase"]) for r in json.loads(listed.stdout)["records"]]


def test_state_rm_and_import_leave_records_and_the_trail_verifies(tmp_path: Path) -> None:
    root = audited_folder(tmp_path / "specs")

    assert operations(root) == [
        ("apply", "started"),
        ("apply", "completed"),
        ("state rm", "started"),
        ("state rm", "completed"),
        ("import", "started"),
        ("import", "completed"),
    ]
    checked = verify(root)
    assert checked.returncode == 0, checked.stderr
    assert "is intact: 6 records in one unbroken chain" in checked.stdout


def test_an_apply_killed_outright_leaves_its_started_record(tmp_path: Path) -> None:
    root = project_folder(tmp_path / "specs")
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_APPLY, str(root), "0.3"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "create complete" in line:
            break
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    (root / ".trainform" / "state.json.lock").unlink()  # what force-unlock does

    assert operations(root) == [("apply", "started")]
    shown = run_cli("state", "audit", str(root))
    assert "apply    started, never completed" in shown.stdout
    assert verify(root).returncode == 0


def test_a_failed_command_completes_its_record_with_the_failure(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG, "platform.yaml": PROJECT})
    failed = run_cli("state", "rm", "Project/nothing", "--dir", str(root))
    assert failed.returncode == 1
    listed = json.loads(run_cli("state", "audit", str(root), "--format", "json").stdout)
    started, completed = listed["records"]
    assert completed["outcome"] == "failed" and "not in state" in completed["error"]
    assert completed["started"] == started["sequence"]


def rewrite(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    lines = path.read_text().splitlines()
    path.write_text("\n".join(change(lines)) + "\n")


def edited(lines: list[str]) -> list[str]:
    record = json.loads(lines[2])
    record["who"]["user"] = "somebody-else"
    return [*lines[:2], json.dumps(record, sort_keys=True), *lines[3:]]


def forged(lines: list[str]) -> list[str]:
    """A record inserted with a digest of its own (but the chain cannot be re-signed)."""
    record = json.loads(lines[1])
    record["operation"] = "destroy"
    record["digest"] = record_digest(record)
    return [*lines[:2], json.dumps(record, sort_keys=True), *lines[2:]]


@pytest.mark.parametrize(
    ("change", "found"),
    [
        pytest.param(edited, "record 3 was edited", id="edited"),
        pytest.param(
            lambda lines: lines[:2] + lines[3:], "record 4 follows record 2", id="deleted"
        ),
        pytest.param(forged, "record 2 follows record 2", id="inserted"),
        pytest.param(lambda lines: lines[:-1], "records were removed", id="newest-cut-off"),
        pytest.param(
            lambda lines: [*lines[:3], "{garbage", *lines[3:]], "not a readable", id="garbage"
        ),
    ],
)
def test_an_altered_local_trail_is_found(tmp_path: Path, change, found: str) -> None:  # type: ignore[no-untyped-def]
    root = audited_folder(tmp_path / "specs")
    rewrite(trail(root), change)

    checked = verify(root)

    assert checked.returncode == 1
    assert "was altered" in checked.stderr and found in checked.stderr, checked.stderr
    assert "state.json.audit.jsonl:" in checked.stderr


def s3_backend(endpoint: str, bucket: str) -> S3Backend:
    connection = ObjectStoreConnection(
        endpoint_url=endpoint, region="us-east-1", addressing_style="path"
    )
    return S3Backend(bucket, KEY, connection, timeout=5.0, max_attempts=2)


def three_records(backend: S3Backend) -> None:
    for operation in ("apply", "destroy", "apply"):
        backend.append_audit({"time": "2026-12-04T00:00:00Z", "operation": operation})


def test_an_altered_s3_trail_is_found(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket()
    backend = s3_backend(s3_env.endpoint, bucket)
    three_records(backend)
    assert backend.verify_audit().intact
    client = s3_env.client()
    second = f"{KEY}.audit/chain-000000000002.json"
    body = json.loads(client.get_object(Bucket=bucket, Key=second)["Body"].read())
    body["operation"] = "plan"
    client.put_object(Bucket=bucket, Key=second, Body=json.dumps(body).encode())
    client.delete_object(Bucket=bucket, Key=f"{KEY}.audit/chain-000000000003.json")

    problems = s3_backend(s3_env.endpoint, bucket).verify_audit().problems

    assert any("chain-000000000002.json: rewritten (2 versions)" in p for p in problems)
    assert any("chain-000000000003.json: deleted" in p for p in problems)
    assert any("record 2 was edited" in p for p in problems)
    assert any("records were removed" in p for p in problems)


def test_a_lost_response_to_an_audit_write_is_our_own_write(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket()
    proxy = FaultProxy(s3_env.endpoint)
    try:
        backend = s3_backend(proxy.endpoint, bucket)
        backend.append_audit({"time": "2026-12-04T00:00:00Z", "operation": "apply"})
        proxy.drop_suffix = "chain-000000000002.json"
        proxy.mode = "drop-conditional-put"
        started = time.monotonic()

        stored = backend.append_audit({"time": "2026-12-04T00:00:01Z", "operation": "destroy"})

        assert proxy.dropped == 1 and time.monotonic() - started < 30
        assert stored["sequence"] == 2
        assert [r["sequence"] for r in backend.read_audit()] == [1, 2]
        assert backend.verify_audit().intact
    finally:
        proxy.close()
