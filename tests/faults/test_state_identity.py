"""State identity: a swapped, rolled-back or deleted state file is refused, never planned on.

Each case runs the installed CLI on a small local platform that was applied twice (so
backups exist), then tampers with `.trainform/state.json` the way CI caches, operators and
copy-paste do, and checks the refusal names what was found, what was expected and the
exact command to recover; and that recovering works.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import CONFIG, PROJECT, run_cli, write_tree

POOL = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: here}
spec: {provider: local, nodes: 1, cpu: 2, memory: 1Gi}
"""


def queue(cpu: int) -> str:
    return f"""\
apiVersion: trainform/v1
kind: Queue
metadata: {{name: training}}
spec:
  pools:
    - pool: here
      nominalQuota: {{cpu: {cpu}, memory: 1Gi}}
"""


def platform(cpu: int) -> str:
    return "---\n".join([PROJECT, POOL, queue(cpu)])


def state_files(root: Path) -> Path:
    return root / ".trainform"


@pytest.fixture
def applied(tmp_path: Path) -> Path:
    """A platform applied twice: state at serial > backup 1's, backup 1 of the same lineage."""
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG, "platform.yaml": platform(1)})
    first = run_cli("apply", str(root), "--auto-approve")
    assert first.returncode == 0, first.stdout + first.stderr
    write_tree(root, {"platform.yaml": platform(2)})
    assert run_cli("apply", str(root), "--auto-approve").returncode == 0
    return root


def document(root: Path, name: str = "state.json") -> dict:
    return json.loads((state_files(root) / name).read_text())


def test_a_state_of_another_lineage_is_refused_naming_both(applied: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write_tree(other, {"trainform.yaml": CONFIG, "platform.yaml": PROJECT})
    assert run_cli("apply", str(other), "--auto-approve").returncode == 0
    mine = document(applied)["lineage"]
    theirs = document(other)["lineage"]
    shutil.copy(state_files(other) / "state.json", state_files(applied) / "state.json")

    result = run_cli("plan", str(applied))

    assert result.returncode == 1, result.stdout + result.stderr
    assert f"found lineage {theirs}" in result.stderr
    assert f"expected lineage {mine}" in result.stderr
    assert "another workspace's state" in result.stderr
    assert "trainform state restore 1" in result.stderr
    assert "--accept-state" in result.stderr


def test_a_backup_copied_over_the_state_is_refused_and_restore_puts_the_newest_back(
    applied: Path,
) -> None:
    newest = document(applied)
    backup = document(applied, "state.json.backup.1")
    assert backup["serial"] < newest["serial"]
    shutil.copy(state_files(applied) / "state.json.backup.1", state_files(applied) / "state.json")

    refused = run_cli("apply", str(applied), "--auto-approve")
    assert refused.returncode == 1
    assert f"found serial {backup['serial']}" in refused.stderr
    assert f"expected serial {newest['serial']} or later" in refused.stderr
    assert "went backwards" in refused.stderr
    # nothing was rotated away: the backups are as they were
    assert document(applied, "state.json.backup.1")["serial"] == backup["serial"]


def test_a_missing_state_with_backups_is_refused_then_restored(applied: Path) -> None:
    backup = document(applied, "state.json.backup.1")
    (state_files(applied) / "state.json").unlink()

    refused = run_cli("plan", str(applied))
    assert refused.returncode == 1
    assert "found no state document" in refused.stderr
    assert "backup generation" in refused.stderr
    assert "trainform state restore 1" in refused.stderr

    restored = run_cli("state", "restore", "1", str(applied))
    assert restored.returncode == 0, restored.stderr
    assert f"serial {backup['serial']}" in restored.stdout
    assert document(applied)["serial"] == backup["serial"]
    plan = run_cli("plan", str(applied), "--detailed-exitcode")
    assert plan.returncode == 2  # the restored state is older: the queue change shows again
    assert "Queue/training" in plan.stdout


def test_accept_state_uses_the_swap_and_records_it(applied: Path) -> None:
    shutil.copy(state_files(applied) / "state.json.backup.1", state_files(applied) / "state.json")
    accepted = run_cli("apply", str(applied), "--auto-approve", "--accept-state")
    assert accepted.returncode == 0, accepted.stderr
    identity = document(applied, "state.json.identity")
    assert identity["history"][-1]["event"] == "accept-state"
    assert "--accept-state" in identity["history"][-1]["reason"]
    assert run_cli("plan", str(applied), "--detailed-exitcode").returncode == 0


def test_state_accept_records_a_deliberate_fresh_start(applied: Path) -> None:
    (state_files(applied) / "state.json").unlink()
    accepted = run_cli("state", "accept", str(applied), "--reason", "moved to a new cluster")
    assert accepted.returncode == 0, accepted.stderr
    history = document(applied, "state.json.identity")["history"]
    assert history[-1]["reason"] == "moved to a new cluster"
    assert run_cli("plan", str(applied)).returncode == 0


def test_a_newer_state_of_the_same_lineage_is_accepted(applied: Path) -> None:
    # a crash between the document write and the identity write leaves the record behind
    identity_path = state_files(applied) / "state.json.identity"
    identity = json.loads(identity_path.read_text())
    identity["serial"] -= 1
    identity_path.write_text(json.dumps(identity))
    assert run_cli("plan", str(applied), "--detailed-exitcode").returncode == 0


# Witnesses: the identity record is no single point of failure ----------------------------


def test_a_deleted_identity_record_is_itself_refused_with_the_way_back(applied: Path) -> None:
    (state_files(applied) / "state.json.identity").unlink()

    refused = run_cli("plan", str(applied))

    assert refused.returncode == 1
    assert "with no identity record" in refused.stderr
    assert "the audit trail saw lineage" in refused.stderr and "backup 1 holds" in refused.stderr
    assert "trainform state accept --reason WHY" in refused.stderr
    accepted = run_cli("state", "accept", str(applied), "--reason", "identity deleted by hand")
    assert accepted.returncode == 0, accepted.stderr
    assert run_cli("plan", str(applied), "--detailed-exitcode").returncode == 0


def test_a_state_rolled_back_with_its_identity_record_is_refused_by_the_audit_trail(
    applied: Path,
) -> None:
    files = state_files(applied)
    old = document(applied, "state.json.backup.1")
    shutil.copy(files / "state.json.backup.1", files / "state.json")
    identity = json.loads((files / "state.json.identity").read_text())
    identity["serial"] = old["serial"]
    (files / "state.json.identity").write_text(json.dumps(identity))
    for generation in (1, 2):
        (files / f"state.json.backup.{generation}").unlink(missing_ok=True)

    refused = run_cli("plan", str(applied))

    assert refused.returncode == 1
    assert f"found serial {old['serial']}" in refused.stderr
    assert "the audit trail saw that serial" in refused.stderr


def test_a_deleted_identity_and_backups_are_still_refused_by_the_audit_trail(
    applied: Path,
) -> None:
    files = state_files(applied)
    (files / "state.json.identity").unlink()
    for backup in files.glob("state.json.backup.*"):
        backup.unlink()

    refused = run_cli("plan", str(applied))

    assert refused.returncode == 1 and "with no identity record" in refused.stderr
    assert "the audit trail saw lineage" in refused.stderr
