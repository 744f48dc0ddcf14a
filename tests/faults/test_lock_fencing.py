"""Fenced locks: a holder whose lock was taken away fails its next write and overwrites
nothing; force-unlock of a live holder is refused; a lost response to the lock PUT is our
own lock; two signals at any moment leave no lock behind; `apply DIR` keeps its lock from
plan to apply.

Local backends run in this process and through the CLI; S3 against moto and SeaweedFS
(tests/services/s3.py), the lost response through tests.faults.s3_proxy.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainform.planner.backends.base import LockLostError
from trainform.planner.backends.local import LocalBackend
from trainform.planner.backends.s3 import S3Backend
from trainform.planner.state import State, StateError
from trainform.specs.models.config import ObjectStoreConnection

from tests.faults.s3_proxy import FaultProxy
from tests.faults.test_s3_faults import backend_through, created
from tests.faults.test_signals import projects
from tests.helpers import CONFIG, REPO, run_cli, write_tree
from tests.services.s3 import S3Server

KEY = "team/state.json"
SIGNAL_RUNS = int(os.environ.get("TRAINFORM_SIGNAL_RUNS", "30"))

SLOW_APPLY = """
import sys, time
from trainform.providers.local.provider import LocalProvider

original = LocalProvider.create

def slow_create(self, resource):
    time.sleep(float(sys.argv[2]))
    return original(self, resource)

LocalProvider.create = slow_create
from trainform.cli import main
main(["apply", sys.argv[1], "--auto-approve", "--parallelism", "1"])
"""


def lose_the_lock_and_write(holder, rescuer) -> tuple[State, State]:  # type: ignore[no-untyped-def]
    """The holder records a change; the rescuer forces the lock away and applies its own;
    returns (the holder's state in memory, the state as stored)."""
    held = holder.lock("apply")
    mine = holder.read() or State.new()
    holder.record(mine, created("Project/old-holder"))

    rescuer.force_unlock(held.id, force=True)
    taken = rescuer.lock("apply")
    theirs = rescuer.read()
    assert theirs is not None and "Project/old-holder" in theirs.resources
    rescuer.record(theirs, created("Project/rescuer"))
    rescuer.compact(theirs)
    rescuer.unlock(taken)

    with pytest.raises(LockLostError, match=f"lock {held.id} was force-unlocked"):
        holder.record(mine, created("Project/late"))
    with pytest.raises(LockLostError, match="writes nothing more"):
        holder.compact(mine)
    holder.unlock(held)  # the late release removes nothing
    stored = rescuer.read()
    assert stored is not None
    return mine, stored


def test_a_local_holder_that_lost_its_lock_overwrites_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    _, stored = lose_the_lock_and_write(LocalBackend(path), LocalBackend(path))

    assert set(stored.resources) == {"Project/old-holder", "Project/rescuer"}
    assert not path.with_name("state.json.lock").exists()
    assert not list(tmp_path.glob(".state.json.*.tmp"))


def s3_backend(s3_env: S3Server, bucket: str) -> S3Backend:
    connection = ObjectStoreConnection(
        endpoint_url=s3_env.endpoint, region="us-east-1", addressing_style="path"
    )
    return S3Backend(bucket, KEY, connection)


def test_an_s3_holder_that_lost_its_lock_overwrites_nothing(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket()
    _, stored = lose_the_lock_and_write(s3_backend(s3_env, bucket), s3_backend(s3_env, bucket))

    assert set(stored.resources) == {"Project/old-holder", "Project/rescuer"}
    assert s3_backend(s3_env, bucket).lock("plan")  # nobody holds it


def test_a_lost_response_to_the_lock_put_is_our_own_lock(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket()
    proxy = FaultProxy(s3_env.endpoint)
    try:
        backend = backend_through(proxy, bucket, timeout=5.0)
        proxy.drop_suffix = f"{KEY}.lock"
        proxy.mode = "drop-conditional-put"

        info = backend.lock("apply")

        assert proxy.dropped == 1
        state = State.new()
        backend.record(state, created("Project/a"))  # the fence holds: the lock is ours
        backend.compact(state)
        backend.unlock(info)
        again = backend_through(proxy, bucket, timeout=5.0)
        again.unlock(again.lock("plan"))  # and it was released
    finally:
        proxy.close()


def slow_apply(root: Path, pause: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_APPLY, str(root), str(pause)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )


def project_folder(root: Path) -> Path:
    write_tree(root, {"trainform.yaml": CONFIG, "projects.yaml": projects()})
    return root


def test_force_unlock_refuses_a_live_apply_and_forced_the_apply_stops(tmp_path: Path) -> None:
    root = project_folder(tmp_path / "specs")
    process = slow_apply(root, 0.4)
    assert process.stdout is not None
    for line in process.stdout:
        if "create complete" in line:
            break
    lock = json.loads((root / ".trainform" / "state.json.lock").read_text())

    refused = run_cli("force-unlock", lock["id"], str(root))
    assert refused.returncode == 1
    assert f"pid {process.pid} for `apply`" in refused.stderr
    assert "still running on this host" in refused.stderr
    forced = run_cli("force-unlock", lock["id"], str(root), "--force")
    assert forced.returncode == 0, forced.stderr
    rescuer = run_cli("apply", str(root), "--auto-approve")
    assert rescuer.returncode == 0, rescuer.stdout + rescuer.stderr
    stored = (root / ".trainform" / "state.json").read_bytes()

    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stdout + stderr
    assert f"this run's lock {lock['id']} was force-unlocked" in stdout + stderr
    assert "Traceback" not in stderr
    assert (root / ".trainform" / "state.json").read_bytes() == stored
    assert not (root / ".trainform" / "state.json.lock").exists()
    assert run_cli("plan", str(root), "--detailed-exitcode").returncode == 0


def test_two_sigterms_at_any_moment_leave_no_lock(tmp_path: Path) -> None:
    chooser = random.Random(int(os.environ.get("TRAINFORM_SIGNAL_SEED", "0")) or None)
    left = []
    for run in range(SIGNAL_RUNS):
        root = project_folder(tmp_path / f"run-{run}")
        process = slow_apply(root, 0.02)
        time.sleep(chooser.uniform(0.0, 1.5))
        process.send_signal(signal.SIGTERM)
        time.sleep(chooser.uniform(0.010, 0.020))
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
        assert "Traceback" not in stderr, stderr
        if (root / ".trainform" / "state.json.lock").exists():
            left.append((run, process.returncode, stderr[-400:]))
    assert left == []


def test_apply_dir_keeps_its_lock_from_plan_to_apply(tmp_path: Path) -> None:
    """A second apply waiting with --lock-timeout gets the state after the first one."""
    root = project_folder(tmp_path / "specs")
    first = slow_apply(root, 0.1)
    deadline = time.monotonic() + 30
    lock = root / ".trainform" / "state.json.lock"
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    second = run_cli("apply", str(root), "--auto-approve", "--lock-timeout", "60s")
    first.communicate(timeout=60)

    assert first.returncode == 0
    assert second.returncode == 0, second.stdout + second.stderr
    assert "No changes" in second.stdout
    assert run_cli("plan", str(root), "--detailed-exitcode").returncode == 0


def test_a_refused_force_unlock_changes_nothing(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "state.json")
    held = backend.lock("apply")
    before = backend.lock_path.read_bytes()
    with pytest.raises(StateError, match="pass --force"):
        LocalBackend(tmp_path / "state.json").force_unlock(held.id)
    assert backend.lock_path.read_bytes() == before
    backend.unlock(held)


def test_a_full_disk_is_a_clear_error_naming_the_path_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    backend = LocalBackend(tmp_path / "state.json")
    held = backend.lock("apply")
    state = State.new()
    backend.record(state, created("Project/a"))

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StateError, match=f"cannot write state {tmp_path / 'state.json'}: No sp"):
        backend.compact(state)
    with pytest.raises(StateError, match="state.json.journal: No space left on device"):
        backend.record(state, created("Project/b"))
    monkeypatch.undo()

    assert not list(tmp_path.glob(".*.tmp"))
    backend.unlock(held)
    assert "Project/a" in (LocalBackend(tmp_path / "state.json").read() or State.new()).resources
