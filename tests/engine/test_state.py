"""State durability: the journal, compaction, backups, corruption and the lock.

Every test works on a LocalBackend in tmp_path; "a new backend" stands for the next
process, which knows only what reached the disk.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.backends.base import LockInfo, StateLockedError
from trainform.planner.backends.local import LocalBackend
from trainform.planner.state import (
    ResourceState,
    State,
    StateCorruptError,
    StateError,
    canonical_json,
)

from tests.engine.support import SpecFolder, run_trainform, simulate_crash


def resource(address: str, value: int = 1) -> ResourceState:
    kind = address.split("/")[0]
    document = {"metadata": {"labels": {}, "annotations": {}}, "spec": {"value": value}}
    return ResourceState(address, kind, ["local"], document, f"sha256:{value}")


def intent(address: str, operation: str = "create") -> dict[str, Any]:
    kind = address.split("/")[0]
    return {
        "type": "intent",
        "address": address,
        "operation": operation,
        "kind": kind,
        "providers": ["local"],
    }


def outcome(address: str, value: int | None = 1) -> dict[str, Any]:
    body = None if value is None else resource(address, value).to_json()
    return {"type": "outcome", "address": address, "resource": body}


def record_all(backend: LocalBackend, state: State, entries: list[dict[str, Any]]) -> None:
    for entry in entries:
        backend.record(state, entry)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "state.json"


# journal -----------------------------------------------------------------------------


def test_recorded_entries_are_read_back_by_a_new_backend(path: Path) -> None:
    writer = LocalBackend(path)
    state = State.new()
    record_all(
        writer,
        state,
        [intent("Project/a"), outcome("Project/a"), intent("Queue/q"), outcome("Queue/q", 2)],
    )
    simulate_crash(writer)

    read = LocalBackend(path).read()

    assert read is not None
    assert read.lineage == state.lineage
    assert read.serial == state.serial == 4
    assert read.to_json()["resources"] == state.to_json()["resources"]
    assert sorted(read.resources) == ["Project/a", "Queue/q"]
    assert read.resources["Queue/q"].spec["spec"] == {"value": 2}
    assert read.resources["Queue/q"].pending is None


def test_compacted_state_reads_back_the_same_and_empties_the_journal(path: Path) -> None:
    backend = LocalBackend(path)
    state = State.new()
    record_all(backend, state, [intent("Project/a"), outcome("Project/a")])
    backend.compact(state)

    assert not backend.journal_path.exists()
    read = LocalBackend(path).read()
    assert read is not None and read.to_json() == state.to_json()


def test_an_intent_without_outcome_is_read_back_as_pending(path: Path) -> None:
    backend = LocalBackend(path)
    state = State.new()
    record_all(backend, state, [intent("Project/a"), outcome("Project/a"), intent("Queue/q")])
    record_all(backend, state, [intent("Project/a", "update")])
    simulate_crash(backend)

    read = LocalBackend(path).read()

    assert read is not None
    assert read.resources["Queue/q"].pending == "create"
    assert read.resources["Queue/q"].spec == {}
    assert read.resources["Project/a"].pending == "update"
    assert read.resources["Project/a"].spec["spec"] == {"value": 1}


def test_a_torn_last_journal_line_is_ignored(path: Path) -> None:
    backend = LocalBackend(path)
    state = State.new()
    record_all(backend, state, [intent("Project/a"), outcome("Project/a")])
    simulate_crash(backend)
    torn = canonical_json(outcome("Queue/q")).encode()[:25]
    with open(backend.journal_path, "ab") as handle:
        handle.write(torn)

    read = LocalBackend(path).read()

    assert read is not None
    assert read.serial == 2
    assert sorted(read.resources) == ["Project/a"]


def test_recording_after_a_torn_line_keeps_every_complete_entry(path: Path) -> None:
    backend = LocalBackend(path)
    state = State.new()
    record_all(backend, state, [intent("Project/a"), outcome("Project/a")])
    simulate_crash(backend)
    with open(backend.journal_path, "ab") as handle:
        handle.write(b'{"type":"outc')

    next_run = LocalBackend(path)
    resumed = next_run.read()
    assert resumed is not None
    record_all(next_run, resumed, [intent("Queue/q"), outcome("Queue/q")])
    simulate_crash(next_run)

    read = LocalBackend(path).read()
    assert read is not None
    assert sorted(read.resources) == ["Project/a", "Queue/q"]
    assert read.serial == 4


def test_a_corrupt_line_before_the_last_is_an_error(path: Path) -> None:
    backend = LocalBackend(path)
    state = State.new()
    record_all(backend, state, [intent("Project/a"), outcome("Project/a")])
    simulate_crash(backend)
    lines = backend.journal_path.read_bytes().splitlines()
    lines[1] = b"{garbage"
    backend.journal_path.write_bytes(b"\n".join(lines) + b"\n")

    with pytest.raises(StateCorruptError, match="line 2 is not valid JSON"):
        LocalBackend(path).read()


def test_a_journal_already_folded_into_the_document_is_not_replayed_twice(path: Path) -> None:
    """A crash between the rename of the new document and the removal of the journal."""
    backend = LocalBackend(path)
    state = State.new()
    record_all(backend, state, [intent("Project/a"), outcome("Project/a")])
    journal = backend.journal_path.read_bytes()
    backend.compact(state)
    backend.journal_path.write_bytes(journal)

    read = LocalBackend(path).read()

    assert read is not None
    assert read.serial == 2
    assert read.to_json() == state.to_json()


def test_a_journal_without_a_state_file_that_did_not_start_empty_is_an_error(path: Path) -> None:
    backend = LocalBackend(path)
    state = State.new()
    state.serial = 7
    record_all(backend, state, [intent("Project/a")])
    simulate_crash(backend)
    path.unlink(missing_ok=True)

    with pytest.raises(StateCorruptError, match="state file is missing"):
        LocalBackend(path).read()


# corruption --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"  \n", id="blank"),
        pytest.param(b'{"formatVersion": 1, "lineage": "x", "ser', id="truncated"),
        pytest.param(b"\xff\xfe\x00garbage", id="binary"),
        pytest.param(b"[]", id="array"),
        pytest.param(b'{"formatVersion": 99, "lineage": "x", "serial": 1}', id="future-version"),
        pytest.param(b'{"formatVersion": 1, "lineage": "x"}', id="missing-fields"),
        pytest.param(
            b'{"formatVersion": 1, "lineage": "x", "serial": 1, "resources": {"A/b": 3}}',
            id="malformed-resource",
        ),
    ],
)
def test_an_unreadable_state_file_raises_and_is_left_untouched(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    before = sorted(p.name for p in path.parent.iterdir())

    with pytest.raises(StateCorruptError) as raised:
        LocalBackend(path).read()

    assert path.read_bytes() == content
    assert sorted(p.name for p in path.parent.iterdir()) == before
    message = str(raised.value)
    assert message.startswith(f"cannot read state {path}: ")
    assert "state.json.backup.N" in message


def test_the_cli_refuses_a_corrupt_state_and_leaves_it_untouched(quickstart: SpecFolder) -> None:
    quickstart.converge()
    state_file = quickstart.root / ".trainform" / "state.json"
    corrupt = state_file.read_bytes()[:-40]
    state_file.write_bytes(corrupt)
    listing = sorted(p.name for p in state_file.parent.iterdir())

    result = run_trainform("plan", ".", cwd=quickstart.root)

    assert result.returncode == 1
    assert "cannot read state" in result.stderr and "not valid JSON" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert state_file.read_bytes() == corrupt
    assert sorted(p.name for p in state_file.parent.iterdir()) == listing


# compaction and backups --------------------------------------------------------------


def serial_of(path: Path) -> int:
    return int(json.loads(path.read_bytes())["serial"])


def operation(backend: LocalBackend, state: State, address: str, value: int) -> None:
    """One locked operation recording one change: what makes a backup generation."""
    lock = backend.lock("apply")
    backend.record(
        state,
        {"type": "outcome", "address": address, "resource": resource(address, value).to_json()},
    )
    backend.compact(state)
    backend.unlock(lock)


def test_backups_rotate_keeping_the_newest_generations(path: Path) -> None:
    backend = LocalBackend(path, backups=3)
    state = State.new()
    for value in range(1, 6):
        operation(backend, state, "Project/a", value)

    assert serial_of(path) == 5
    backups = {n: path.with_name(f"state.json.backup.{n}") for n in range(1, 5)}
    assert [serial_of(backups[n]) for n in (1, 2, 3)] == [4, 3, 2]
    assert not backups[4].exists()


def test_one_operation_makes_one_backup_however_often_it_compacts(path: Path) -> None:
    backend = LocalBackend(path, backups=3)
    state = State.new()
    operation(backend, state, "Project/a", 1)
    backend.compact_every = 1
    lock = backend.lock("apply")
    for value in range(2, 6):
        backend.record(
            state,
            {
                "type": "outcome",
                "address": f"Project/p{value}",
                "resource": resource(f"Project/p{value}", value).to_json(),
            },
        )
    backend.compact(state)
    backend.unlock(lock)

    assert serial_of(path.with_name("state.json.backup.1")) == 1
    assert not path.with_name("state.json.backup.2").exists()


def test_no_backups_are_written_when_none_are_asked_for(path: Path) -> None:
    backend = LocalBackend(path, backups=0)
    state = State.new()
    for serial in range(3):
        state.serial = serial
        backend.compact(state)

    assert sorted(p.name for p in path.parent.iterdir()) == ["state.json", "state.json.identity"]


def test_a_backup_is_a_generation_of_its_own_not_a_view_of_the_current_file(path: Path) -> None:
    backend = LocalBackend(path, backups=2)
    state = State.new()
    operation(backend, state, "Project/a", 1)
    operation(backend, state, "Project/a", 2)

    backup = json.loads(path.with_name("state.json.backup.1").read_bytes())
    assert backup["resources"]["Project/a"]["spec"]["spec"] == {"value": 1}
    assert json.loads(path.read_bytes())["resources"]["Project/a"]["spec"]["spec"] == {"value": 2}


def test_the_state_file_is_parseable_at_every_instant_of_compaction(path: Path) -> None:
    backend = LocalBackend(path, backups=2)
    state = State.new()
    for index in range(50):
        state.resources[f"Project/p{index}"] = resource(f"Project/p{index}", index)
    backend.compact(state)
    failures: list[str] = []
    done = threading.Event()

    def read_continuously() -> None:
        while not done.is_set():
            try:
                json.loads(path.read_bytes())
            except (OSError, ValueError) as exc:
                failures.append(repr(exc))

    reader = threading.Thread(target=read_continuously)
    reader.start()
    try:
        for serial in range(1, 31):  # each compaction rewrites, renames and rotates backups
            state.serial = serial
            backend.compact(state)
    finally:
        done.set()
        reader.join()

    assert failures == []


def test_a_crash_before_the_rename_of_a_compaction_loses_nothing(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = LocalBackend(path)
    state = State.new()
    record_all(backend, state, [intent("Project/a"), outcome("Project/a")])
    backend.compact(state)
    document = path.read_bytes()
    record_all(backend, state, [intent("Queue/q"), outcome("Queue/q")])
    real_replace = os.replace

    def crash_on_rename(source: Any, target: Any) -> None:
        if Path(source).name.endswith(".tmp"):
            raise OSError("simulated crash before the rename")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", crash_on_rename)
    with pytest.raises(OSError, match="simulated crash"):
        backend.compact(state)
    monkeypatch.setattr(os, "replace", real_replace)
    simulate_crash(backend)

    assert path.read_bytes() == document
    read = LocalBackend(path).read()
    assert read is not None
    assert sorted(read.resources) == ["Project/a", "Queue/q"]
    assert read.serial == 4


# locking -----------------------------------------------------------------------------


def test_a_second_lock_fails_at_once_naming_the_holder(path: Path) -> None:
    held = LocalBackend(path).lock("apply")
    started = time.monotonic()

    with pytest.raises(StateLockedError) as raised:
        LocalBackend(path).lock("plan")

    assert time.monotonic() - started < 1.0
    message = str(raised.value)
    assert f"held by {held.holder}@{socket.gethostname()} pid {os.getpid()}" in message
    assert "for `apply`" in message
    assert f"lock id {held.id}" in message
    assert f"trainform force-unlock {held.id}" in message
    assert "no longer running" not in message
    assert raised.value.info == held


def test_unlock_releases_the_lock_for_the_next_holder(path: Path) -> None:
    backend = LocalBackend(path)
    backend.unlock(backend.lock("apply"))

    info = LocalBackend(path).lock("plan")

    assert json.loads(backend.lock_path.read_text())["id"] == info.id


def test_unlock_with_another_holders_info_leaves_their_lock(path: Path) -> None:
    backend = LocalBackend(path)
    held = backend.lock("apply")
    stranger = LockInfo.create("plan")

    backend.unlock(stranger)

    assert json.loads(backend.lock_path.read_text())["id"] == held.id


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_lock_of_a_dead_process_says_it_is_no_longer_running(path: Path) -> None:
    backend = LocalBackend(path)
    path.parent.mkdir(parents=True)
    info = LockInfo("dead-lock-id", "someone", socket.gethostname(), dead_pid(), "apply", "T")
    backend.lock_path.write_text(json.dumps(info.to_json()))

    with pytest.raises(StateLockedError) as raised:
        backend.lock("plan")

    message = str(raised.value)
    assert "no longer running" in message
    assert "trainform force-unlock dead-lock-id" in message


def test_a_lock_from_another_host_makes_no_claim_about_its_process(path: Path) -> None:
    backend = LocalBackend(path)
    path.parent.mkdir(parents=True)
    info = LockInfo("remote-id", "someone", "another-host.invalid", 1, "apply", "T")
    backend.lock_path.write_text(json.dumps(info.to_json()))

    with pytest.raises(StateLockedError) as raised:
        backend.lock("plan")

    assert info.process_alive() is None
    assert "no longer running" not in str(raised.value)


def test_force_unlock_with_the_wrong_id_fails_and_keeps_the_lock(path: Path) -> None:
    backend = LocalBackend(path)
    held = backend.lock("apply")

    with pytest.raises(StateError, match=f"held under id {held.id}"):
        LocalBackend(path).force_unlock("not-the-id")

    assert backend.lock_path.exists()


def test_force_unlock_of_a_live_holder_is_refused_unless_forced(path: Path) -> None:
    held = LocalBackend(path).lock("apply")  # held by this process, which runs

    with pytest.raises(StateError, match=f"pid {held.pid} .* is still running on this host"):
        LocalBackend(path).force_unlock(held.id)
    assert LocalBackend(path).lock_path.exists()

    removed = LocalBackend(path).force_unlock(held.id, force=True)

    assert removed == held
    assert LocalBackend(path).lock("plan").id != held.id


def test_force_unlock_of_an_unlocked_state_says_so(path: Path) -> None:
    with pytest.raises(StateError, match="the state is not locked"):
        LocalBackend(path).force_unlock("anything")


def test_an_unreadable_lock_file_still_blocks_and_can_be_forced(path: Path) -> None:
    backend = LocalBackend(path)
    path.parent.mkdir(parents=True)
    backend.lock_path.write_text("")  # a crash between creating and writing the lock

    with pytest.raises(StateLockedError, match="lock id unknown"):
        backend.lock("plan")

    backend.force_unlock("unknown")
    assert not backend.lock_path.exists()
