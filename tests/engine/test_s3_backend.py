"""The S3 state backend against real S3 servers (moto and SeaweedFS, see tests/services/s3.py).

Covers: reading, journaling, crash replay and compaction; history in object versions; the
lock and force-unlock; compare-and-swap with parallel writers, with and without the lock;
two concurrent `trainform apply` runs; the start-up probe (a stand-in endpoint that ignores
conditional writes, an unversioned bucket); and failures that must never read as "no state".
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.backends.base import LockInfo, StateLockedError
from trainform.planner.backends.s3 import (
    S3Backend,
    S3StateError,
    StateChangedError,
    UnsafeEndpointError,
)
from trainform.planner.errors import PlannerError
from trainform.planner.state import State, StateError
from trainform.planner.workspace import make_backend
from trainform.providers.objectstore.client import make_client
from trainform.specs import RootConfig, load_specs
from trainform.specs.models.config import ObjectStoreConnection

from tests.engine.support import QUICKSTART, TRAINFORM, copy_example, run_trainform
from tests.services.common import free_ports
from tests.services.s3 import SECRET_KEY, S3Server

KEY = "team/state.json"
JOURNAL = f"{KEY}.journal/"


def connection(endpoint: str) -> ObjectStoreConnection:
    return ObjectStoreConnection(endpoint_url=endpoint, region="us-east-1", addressing_style="path")


def open_backend(server: S3Server, bucket: str, **options: Any) -> S3Backend:
    return S3Backend(bucket, KEY, connection(server.endpoint), **options)


def created(address: str, value: Any = None) -> dict[str, Any]:
    """The outcome entry of a finished create of a Project at `address`."""
    return {
        "type": "outcome",
        "address": address,
        "resource": {
            "kind": "Project",
            "providers": ["local"],
            "spec": {"owners": [f"{address}@example.com"], "value": value},
            "specHash": f"hash-{address}",
        },
    }


def intent(address: str) -> dict[str, Any]:
    return {
        "type": "intent",
        "address": address,
        "operation": "create",
        "kind": "Project",
        "providers": ["local"],
    }


def object_versions(server: S3Server, bucket: str, prefix: str) -> list[dict[str, Any]]:
    page = server.client().list_object_versions(Bucket=bucket, Prefix=prefix)
    return [*page.get("Versions", []), *page.get("DeleteMarkers", [])]


def seed(server: S3Server, bucket: str, addresses: list[str]) -> State:
    """A state document holding `addresses`, written through a backend."""
    backend = open_backend(server, bucket)
    state = State.new()
    for address in addresses:
        state.apply_entry(created(address))
    backend.compact(state)
    return state


@pytest.fixture
def bucket(s3_env: S3Server) -> str:
    return s3_env.new_bucket()


# reading, journal, compaction ----------------------------------------------------------------


def test_read_of_an_empty_bucket_is_none(s3_env: S3Server, bucket: str) -> None:
    assert open_backend(s3_env, bucket).read() is None


def test_recorded_entries_are_in_the_state_after_compaction(s3_env: S3Server, bucket: str) -> None:
    backend = open_backend(s3_env, bucket)
    state = backend.read() or State.new()
    for address in ("Project/a", "Project/b"):
        backend.record(state, intent(address))
        backend.record(state, created(address))
    assert len(object_versions(s3_env, bucket, JOURNAL)) == 4
    backend.compact(state)

    again = open_backend(s3_env, bucket).read()
    assert again is not None
    assert (again.lineage, again.serial) == (state.lineage, 4)
    assert sorted(again.resources) == ["Project/a", "Project/b"]
    assert again.resources["Project/a"].pending is None
    assert object_versions(s3_env, bucket, JOURNAL) == []  # no entries, no delete markers


def test_journal_is_replayed_after_a_crash(s3_env: S3Server, bucket: str) -> None:
    seed(s3_env, bucket, ["Project/kept"])
    crashed = open_backend(s3_env, bucket)
    state = crashed.read()
    assert state is not None
    crashed.record(state, intent("Project/done"))
    crashed.record(state, created("Project/done"))
    crashed.record(state, intent("Project/started"))
    del crashed  # never compacted

    resumed = open_backend(s3_env, bucket)
    replayed = resumed.read()
    assert replayed is not None
    assert replayed.serial == state.serial
    assert sorted(replayed.resources) == ["Project/done", "Project/kept", "Project/started"]
    assert replayed.resources["Project/started"].pending == "create"

    # The next record folds the crashed run's entries into the document before journaling.
    resumed.record(replayed, created("Project/started"))
    resumed.compact(replayed)
    final = open_backend(s3_env, bucket).read()
    assert final is not None and final.resources["Project/started"].pending is None
    assert object_versions(s3_env, bucket, JOURNAL) == []


def test_a_journal_already_in_the_document_is_ignored_then_removed(
    s3_env: S3Server, bucket: str
) -> None:
    """A crash between writing the document and deleting the journal leaves a journal whose
    base serial is older than the document: it must not be replayed twice."""
    state = seed(s3_env, bucket, ["Project/a"])
    stale = f"{JOURNAL}{state.lineage}/0/00000000.json"
    s3_env.client().put_object(Bucket=bucket, Key=stale, Body=b'{"type": "bogus"}')

    backend = open_backend(s3_env, bucket)
    read = backend.read()
    assert read is not None and read.serial == state.serial
    backend.record(read, created("Project/b"))
    backend.compact(read)
    assert object_versions(s3_env, bucket, JOURNAL) == []


def test_a_hole_in_the_journal_is_corruption(s3_env: S3Server, bucket: str) -> None:
    state = seed(s3_env, bucket, [])
    client = s3_env.client()
    for seq in (0, 2):
        key = f"{JOURNAL}{state.lineage}/{state.serial}/{seq:08d}.json"
        client.put_object(Bucket=bucket, Key=key, Body=json.dumps(created(f"Project/p{seq}")))
    with pytest.raises(S3StateError, match="entry 1 is missing from the journal"):
        open_backend(s3_env, bucket).read()


def test_a_reader_racing_a_compaction_reads_the_newer_document(
    s3_env: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_backend(s3_env, bucket)
    state = writer.read() or State.new()
    writer.record(state, created("Project/a"))
    writer.record(state, created("Project/b"))

    reader = open_backend(s3_env, bucket)
    read_entry = reader._read_entry

    def compacted_meanwhile(item: Any) -> dict[str, Any]:
        if not getattr(reader, "_raced", False):
            reader._raced = True  # type: ignore[attr-defined]
            writer.compact(state)  # the lock holder compacts between list and get
        return read_entry(item)

    monkeypatch.setattr(reader, "_read_entry", compacted_meanwhile)
    read = reader.read()
    assert read is not None and sorted(read.resources) == ["Project/a", "Project/b"]
    assert read.serial == state.serial


def test_compactions_keep_every_state_version(s3_env: S3Server, bucket: str) -> None:
    backend = open_backend(s3_env, bucket)
    state = State.new()
    backend.record(state, created("Project/a"))
    backend.compact(state)
    backend.record(state, created("Project/b"))
    backend.compact(state)
    backend.compact(state)  # nothing changed: no new version
    assert open_backend(s3_env, bucket).read() is not None
    versions = [v for v in object_versions(s3_env, bucket, KEY) if v["Key"] == KEY]
    assert len(versions) == 2


def test_compaction_runs_every_max_of_threshold_and_state_size(
    s3_env: S3Server, bucket: str
) -> None:
    backend = open_backend(s3_env, bucket, compact_every=3)
    state = State.new()
    for number in range(7):
        backend.record(state, created("Project/a", value=number))
    # Compacted after entries 3 and 6 (the state is smaller than the threshold).
    assert len(object_versions(s3_env, bucket, JOURNAL)) == 1
    document = open_backend(s3_env, bucket)
    assert document.read() is not None
    assert len([v for v in object_versions(s3_env, bucket, KEY) if v["Key"] == KEY]) == 2


# locking -------------------------------------------------------------------------------------


def test_second_lock_names_the_holder(s3_env: S3Server, bucket: str) -> None:
    holder = open_backend(s3_env, bucket)
    info = holder.lock("apply")
    with pytest.raises(StateLockedError) as caught:
        open_backend(s3_env, bucket).lock("plan")
    assert caught.value.info == info
    message = str(caught.value)
    assert f"{info.holder}@{info.host} pid {info.pid}" in message
    assert info.id in message and "`apply`" in message
    holder.unlock(info)
    other = open_backend(s3_env, bucket)
    other.unlock(other.lock("plan"))


def test_unlock_by_a_non_holder_leaves_the_lock(s3_env: S3Server, bucket: str) -> None:
    holder = open_backend(s3_env, bucket)
    info = holder.lock("apply")
    stranger = open_backend(s3_env, bucket)
    stranger.unlock(LockInfo.create("apply"))
    with pytest.raises(StateLockedError):
        stranger.lock("plan")
    holder.unlock(info)
    assert object_versions(s3_env, bucket, f"{KEY}.lock") == []


def test_force_unlock_needs_the_lock_id(s3_env: S3Server, bucket: str) -> None:
    holder = open_backend(s3_env, bucket)
    info = holder.lock("apply")
    rescuer = open_backend(s3_env, bucket)
    with pytest.raises(S3StateError, match=f"held under id {info.id}"):
        rescuer.force_unlock("not-the-id")
    with pytest.raises(StateError, match="is still running on this host"):
        rescuer.force_unlock(info.id)  # the holder is this very process
    assert rescuer.force_unlock(info.id, force=True) == info
    with pytest.raises(S3StateError, match="not locked"):
        rescuer.force_unlock(info.id, force=True)

    # The old holder's late unlock must not release the lock somebody took since.
    taken = rescuer.lock("apply")
    holder.unlock(info)
    with pytest.raises(StateLockedError, match=taken.id):
        open_backend(s3_env, bucket).lock("plan")
    rescuer.unlock(taken)


# compare-and-swap with parallel writers ------------------------------------------------------


def run_workers(count: int, work: Any) -> list[Any]:
    results: list[Any] = [None] * count

    def run(number: int) -> None:
        try:
            results[number] = work(number)
        except Exception as exc:  # noqa: BLE001 - collected and asserted on
            results[number] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def test_only_the_writer_whose_etag_matched_wins(s3_env: S3Server, bucket: str) -> None:
    seed(s3_env, bucket, ["Project/base"])
    count = 8
    read_done = threading.Barrier(count, timeout=60)

    def write(number: int) -> str:
        backend = open_backend(s3_env, bucket)
        state = backend.read()
        assert state is not None
        backend._check_endpoint()  # probe before the barrier: only the writes race
        state.apply_entry(created(f"Project/w{number}"))
        read_done.wait()
        backend.compact(state)
        return f"Project/w{number}"

    results = run_workers(count, write)
    winners = [r for r in results if isinstance(r, str)]
    losers = [r for r in results if not isinstance(r, str)]
    assert len(winners) == 1, results
    assert all(isinstance(r, StateChangedError) for r in losers), losers
    assert "changed under us" in str(losers[0])
    final = open_backend(s3_env, bucket).read()
    assert final is not None and sorted(final.resources) == sorted(["Project/base", *winners])


def test_no_successful_write_is_lost(s3_env: S3Server, bucket: str) -> None:
    seed(s3_env, bucket, [])
    count, rounds = 8, 3

    def write(number: int) -> list[str]:
        backend = open_backend(s3_env, bucket)
        won: list[str] = []
        for attempt in range(rounds):
            state = backend.read()
            assert state is not None
            address = f"Project/w{number}-{attempt}"
            state.apply_entry(created(address))
            try:
                backend.compact(state)
            except StateChangedError:
                continue
            won.append(address)
        return won

    results = run_workers(count, write)
    assert all(isinstance(r, list) for r in results), results
    winners = sorted(address for won in results for address in won)
    final = open_backend(s3_env, bucket).read()
    assert final is not None
    assert sorted(final.resources) == winners
    assert 1 <= len(winners) <= count * rounds


def test_workers_taking_the_lock_lose_no_update(s3_env: S3Server, bucket: str) -> None:
    count = 8

    def add(number: int) -> int:
        backend = open_backend(s3_env, bucket)
        for attempt in range(600):
            try:
                info = backend.lock("apply")
            except StateLockedError:
                time.sleep(0.02)
                continue
            try:
                state = backend.read() or State.new()
                backend.record(state, intent(f"Project/w{number}"))
                backend.record(state, created(f"Project/w{number}"))
                backend.compact(state)
            finally:
                backend.unlock(info)
            return attempt
        raise AssertionError(f"worker {number} never got the lock")

    results = run_workers(count, add)
    assert all(isinstance(r, int) for r in results), results
    final = open_backend(s3_env, bucket).read()
    assert final is not None
    assert sorted(final.resources) == sorted(f"Project/w{n}" for n in range(count))
    # Locks, journal entries and probe objects leave nothing behind, not even delete markers;
    # beside the state are only the record of what was last written and the audit trail
    # (a started and a completed record per apply, in one chain).
    keys = {v["Key"] for v in object_versions(s3_env, bucket, "")}
    audit = {key for key in keys if key.startswith(f"{KEY}.audit/")}
    assert keys - audit == {KEY, f"{KEY}.identity", f"{KEY}.audit-head"}
    assert len(audit) == 2 * count
    assert open_backend(s3_env, bucket).verify_audit().intact


# two applies from the command line -----------------------------------------------------------


class JournalGate:
    """A TCP proxy to the S3 server that holds back the first journal write it sees.

    An apply going through it stops with the state lock held, at its first journaled
    change, until `release` is set: a deterministic window for a second apply to run.
    """

    JOURNAL_WRITE = re.compile(rb"PUT /[^ ]*\.journal/")

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.held = threading.Event()
        self.release = threading.Event()
        self._sockets: list[socket.socket] = []
        self._mutex = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.upstream)
            except OSError:
                return
            with self._mutex:
                self._sockets += [client, server]
            for source, target, inspect in ((client, server, True), (server, client, False)):
                thread = threading.Thread(
                    target=self._pipe, args=(source, target, inspect), daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _pipe(self, source: socket.socket, target: socket.socket, inspect: bool) -> None:
        try:
            while data := source.recv(65536):
                if inspect and self.JOURNAL_WRITE.search(data):
                    with self._mutex:
                        first = not self.held.is_set()
                        self.held.set()
                    if first:
                        self.release.wait(60)
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, target):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.release.set()
        with self._mutex:
            for sock in [self.listener, *self._sockets]:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept or recv
                except OSError:
                    pass
                sock.close()
        for thread in self._threads:
            thread.join(timeout=5)


@pytest.fixture
def journal_gate(s3_env: S3Server) -> Iterator[JournalGate]:
    gate = JournalGate(s3_env.endpoint)
    yield gate
    gate.close()


def quickstart_on_s3(target: Path, endpoint: str, bucket: str) -> Path:
    folder = copy_example(QUICKSTART, target)
    config = folder / "trainform.yaml"
    text = config.read_text(encoding="utf-8")
    local_state = "state:\n  backend: local\n  path: .trainform/state.json\n"
    assert local_state in text and "providers:\n" in text
    store = (
        "providers:\n  - name: s3\n    type: objectstore\n    connection:\n"
        f"      endpointUrl: {endpoint}\n      region: us-east-1\n      addressingStyle: path\n"
    )
    state = f"state:\n  backend: s3\n  bucket: {bucket}\n  key: {KEY}\n  provider: s3\n"
    config.write_text(
        text.replace(local_state, state).replace("providers:\n", store, 1), encoding="utf-8"
    )
    return folder


def test_of_two_concurrent_applies_one_fails_naming_the_lock_holder(
    s3_env: S3Server, bucket: str, journal_gate: JournalGate, tmp_path: Path
) -> None:
    folder = quickstart_on_s3(tmp_path / "quickstart", journal_gate.endpoint, bucket)
    first = subprocess.Popen(
        [str(TRAINFORM), "apply", "--auto-approve", "."],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not journal_gate.held.wait(0.1):
            assert first.poll() is None, first.communicate()
        lock = s3_env.client().get_object(Bucket=bucket, Key=f"{KEY}.lock")
        holder = LockInfo(**json.loads(lock["Body"].read()))
        assert holder.operation == "apply"

        second = run_trainform("apply", "--auto-approve", ".", cwd=folder)
    finally:
        journal_gate.release.set()
        out, err = first.communicate(timeout=120)

    assert first.returncode == 0, out + err
    assert "Apply complete" in out
    assert second.returncode == 1, second.stdout + second.stderr
    assert f"held by {holder.holder}@{holder.host} pid {holder.pid}" in second.stderr
    assert f"lock id {holder.id}" in second.stderr

    plan = run_trainform("plan", "--detailed-exitcode", ".", cwd=folder)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    state = open_backend(s3_env, bucket).read()
    assert state is not None
    assert sorted(state.resources) == sorted(load_specs(folder).resources)
    assert all(resource.pending is None for resource in state.resources.values())


def test_force_unlock_from_the_command_line(s3_env: S3Server, bucket: str, tmp_path: Path) -> None:
    folder = quickstart_on_s3(tmp_path / "quickstart", s3_env.endpoint, bucket)
    info = open_backend(s3_env, bucket).lock("apply")
    wrong = run_trainform("force-unlock", "not-the-id", ".", cwd=folder)
    assert wrong.returncode == 1 and f"held under id {info.id}" in wrong.stderr
    refused = run_trainform("force-unlock", info.id, ".", cwd=folder)
    assert refused.returncode == 1 and f"pid {info.pid}" in refused.stderr
    assert "is still running on this host" in refused.stderr and "--force" in refused.stderr
    released = run_trainform("force-unlock", info.id, ".", "--force", cwd=folder)
    assert released.returncode == 0, released.stderr
    assert f"Released lock {info.id} held by {info.holder}@{info.host}" in released.stdout
    assert object_versions(s3_env, bucket, f"{KEY}.lock") == []


# the start-up probe and failures -------------------------------------------------------------


class CarelessS3(BaseHTTPRequestHandler):
    """Just enough S3 for the probe: versioning on, every write accepted, no conditions."""

    protocol_version = "HTTP/1.1"
    writes = 0

    def _reply(self, status: int, body: bytes = b"", **headers: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = (
            b'<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            b"<Status>Enabled</Status></VersioningConfiguration>"
        )
        self._reply(200, body, Content_Type="application/xml")

    def do_PUT(self) -> None:  # noqa: N802
        type(self).writes += 1
        self._reply(200, ETag=f'"{type(self).writes:032x}"', x_amz_version_id=str(self.writes))

    def do_POST(self) -> None:  # noqa: N802 - DeleteObjects
        body = b'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>'
        self._reply(200, body, Content_Type="application/xml")

    def do_DELETE(self) -> None:  # noqa: N802
        self._reply(204)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def careless_endpoint(s3_env: S3Server) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), CarelessS3)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_an_endpoint_ignoring_conditional_writes_is_refused(careless_endpoint: str) -> None:
    backend = S3Backend("state", KEY, connection(careless_endpoint))
    with pytest.raises(UnsafeEndpointError) as caught:
        backend.lock("apply")
    message = str(caught.value)
    assert f"the S3 endpoint at {careless_endpoint} does not enforce conditional writes" in message
    assert "If-None-Match" in message and "cannot lock state safely there" in message
    with pytest.raises(UnsafeEndpointError):
        backend.record(State.new(), created("Project/a"))


def test_an_unversioned_bucket_is_refused(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket(versioned=False)
    backend = open_backend(s3_env, bucket)
    with pytest.raises(S3StateError, match=f"state bucket {bucket}: versioning is not enabled"):
        backend.lock("apply")
    assert object_versions(s3_env, bucket, "") == []  # refused before writing anything


def test_an_unreachable_endpoint_is_an_error_not_an_empty_state(s3_env: S3Server) -> None:
    (port,) = free_ports(1)
    closed = connection(f"http://127.0.0.1:{port}")
    backend = S3Backend("state", KEY, closed, client=make_client(closed, max_attempts=1))
    with pytest.raises(S3StateError, match="unreachable"):
        backend.read()
    with pytest.raises(S3StateError, match="unreachable"):
        backend.lock("apply")


def test_a_missing_bucket_is_an_error_not_an_empty_state(s3_env: S3Server) -> None:
    with pytest.raises(S3StateError, match="NoSuchBucket"):
        open_backend(s3_env, "tf-no-such-bucket-here").read()


def test_denied_access_is_an_error_without_the_secret(
    s3_env: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not s3_env.checks_credentials:
        pytest.skip(f"{s3_env.kind} accepts any credentials")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-" + SECRET_KEY)
    with pytest.raises(S3StateError) as caught:
        open_backend(s3_env, bucket).read()
    assert SECRET_KEY not in str(caught.value)
    assert f"s3://{bucket}/{KEY}" in str(caught.value)


# make_backend ----------------------------------------------------------------------------


def config(stores: list[str], provider: str | None) -> RootConfig:
    state: dict[str, Any] = {"backend": "s3", "bucket": "team-state", "key": KEY}
    if provider:
        state["provider"] = provider
    return RootConfig.model_validate(
        {
            "apiVersion": "trainform/v1",
            "providers": [
                {
                    "name": name,
                    "type": "objectstore",
                    "connection": {"endpointUrl": f"http://{name}"},
                }
                for name in stores
            ],
            "state": state,
        }
    )


@pytest.mark.parametrize(
    ("stores", "provider", "endpoint"),
    [
        pytest.param(["only"], None, "http://only", id="the-only-store"),
        pytest.param(["a", "b"], "b", "http://b", id="the-named-store"),
    ],
)
def test_make_backend_uses_the_objectstore_connection(
    stores: list[str], provider: str | None, endpoint: str
) -> None:
    backend = make_backend(config(stores, provider), Path("."))
    assert isinstance(backend, S3Backend)
    assert backend.location == f"s3://team-state/{KEY}"
    assert backend.bucket.connection.endpoint_url == endpoint


@pytest.mark.parametrize(
    ("stores", "provider", "message"),
    [
        pytest.param([], None, "none is declared", id="no-store"),
        pytest.param(["a", "b"], None, "2 are declared", id="ambiguous"),
    ],
)
def test_make_backend_needs_exactly_one_store(
    stores: list[str], provider: str | None, message: str
) -> None:
    with pytest.raises(PlannerError, match=message):
        make_backend(config(stores, provider), Path("."))


def test_an_unknown_state_provider_is_refused_when_the_config_loads() -> None:
    with pytest.raises(ValueError, match="state.provider 'b' is not an objectstore provider"):
        config(["a"], "b")


def test_state_errors_are_state_errors() -> None:
    assert issubclass(S3StateError, StateError)
    assert issubclass(UnsafeEndpointError, S3StateError)
    assert issubclass(StateChangedError, S3StateError)


# drift history -------------------------------------------------------------------------------


def test_drift_runs_are_kept_under_a_prefix_with_bounded_retention(
    s3_env: S3Server, bucket: str
) -> None:
    runs = open_backend(s3_env, bucket).drift_runs()
    for number in range(4):
        runs.append({"checkedAt": f"2026-05-0{number + 1}T09:00:00Z"}, keep=2)

    again = open_backend(s3_env, bucket).drift_runs().read()

    assert [run["checkedAt"] for run in again] == ["2026-05-03T09:00:00Z", "2026-05-04T09:00:00Z"]
    kept = object_versions(s3_env, bucket, f"{KEY}.drift/")
    assert len(kept) == 2 and all("VersionId" in v and "Size" in v for v in kept)


def test_a_rolled_back_state_object_is_refused_naming_the_older_versions(
    s3_env: S3Server, bucket: str
) -> None:
    backend = open_backend(s3_env, bucket)
    for name in ("a", "b"):
        info = backend.lock("apply")
        state = backend.read() or State.new()
        backend.record(state, created(f"Project/{name}"))
        backend.compact(state)
        backend.unlock(info)
    client = s3_env.client()
    versions = [
        v for v in client.list_object_versions(Bucket=bucket, Prefix=KEY)["Versions"]
        if v["Key"] == KEY
    ]
    newest, oldest = versions[0]["VersionId"], versions[-1]["VersionId"]
    client.copy_object(
        Bucket=bucket, Key=KEY, CopySource={"Bucket": bucket, "Key": KEY, "VersionId": oldest}
    )

    with pytest.raises(StateError) as refused:
        open_backend(s3_env, bucket).read()

    message = str(refused.value)
    assert "the state went backwards" in message
    assert "The bucket keeps" in message and newest in message
    assert f"--copy-source {bucket}/{KEY}?versionId=ID" in message
