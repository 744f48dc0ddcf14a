"""`trainform import` on the local provider: adopt reads and never writes; observe finds the
adopted row where it is; the first planned write moves it in one transaction; delete of an
object not yet written removes the adopted row, unless it was replaced since.

Against the real SQLite platform database of a copy of the quickstart. "Another manager"
is a second provider on the same database (another spec folder sharing the local root).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.session import ProviderSet
from trainform.providers.base import DesiredResource, ObserveRequest
from trainform.providers.errors import PermanentProviderError, ProviderError
from trainform.providers.local.database import PlatformDatabase
from trainform.providers.local.provider import LocalProvider
from trainform.specs import load_specs

from tests.engine.support import QUICKSTART, copy_example

PROJECT = "Project/research"
LEGACY = "legacy-research"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return copy_example(QUICKSTART, tmp_path / "quickstart")


def provider_of(root: Path, manager: str, made: list[ProviderSet]) -> LocalProvider:
    providers = ProviderSet(load_specs(root).config, root, manager=manager)
    made.append(providers)
    local = providers.get("local")
    assert isinstance(local, LocalProvider)
    return local


@pytest.fixture
def made() -> Iterator[list[ProviderSet]]:
    sets: list[ProviderSet] = []
    yield sets
    for providers in sets:
        providers.close()


@pytest.fixture
def local(root: Path, made: list[ProviderSet]) -> LocalProvider:
    return provider_of(root, "trainform", made)


@pytest.fixture
def legacy(root: Path, made: list[ProviderSet]) -> LocalProvider:
    """The same platform database, written by another manager."""
    return provider_of(root, "legacy", made)


@pytest.fixture
def desired(root: Path) -> dict[str, DesiredItem]:
    return build_desired(load_specs(root))


def resource(item: DesiredItem, address: str | None = None, **spec: Any) -> DesiredResource:
    """`item` as a DesiredResource (at `address`, if given), some spec fields replaced."""
    document = {**item.document, "spec": {**item.document["spec"], **spec}}
    return DesiredResource(address or item.address, item.kind, item.name, item.project, document)


def request(item: DesiredItem, outputs: dict[str, Any] | None = None) -> ObserveRequest:
    return ObserveRequest(
        item.address, item.kind, item.name, item.project, item.document, outputs or {}
    )


def rows(root: Path) -> dict[str, sqlite3.Row]:
    connection = sqlite3.connect(root / ".trainform" / "platform.db")
    connection.row_factory = sqlite3.Row
    try:
        found = connection.execute("SELECT rowid, * FROM objects ORDER BY address")
        return {row["address"]: row for row in found}
    finally:
        connection.close()


def database_file(root: Path) -> tuple[str, int]:
    """sha256 and mtime (ns) of platform.db."""
    path = root / ".trainform" / "platform.db"
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def refuse_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open the database for writing, or to write it, fails the test."""

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the platform database was opened for writing or written")

    for method in ("__init__", "upsert", "move", "delete", "delete_adopted"):
        monkeypatch.setattr(PlatformDatabase, method, refused)


def test_adopt_reads_the_row_of_another_manager_and_writes_nothing(
    root: Path,
    local: LocalProvider,
    legacy: LocalProvider,
    desired: dict[str, DesiredItem],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    item = desired[PROJECT]
    legacy.create(resource(item, LEGACY))
    legacy.close()  # its writes checkpointed into platform.db
    before = database_file(root), rows(root)
    refuse_writes(monkeypatch)

    adopted = local.adopt(request(item), LEGACY)

    assert adopted.exists and adopted.live == item.document
    created_at = before[1][LEGACY]["created_at"]
    assert adopted.outputs == {"adopted": LEGACY, "adoptedCreatedAt": created_at}
    assert database_file(root) == before[0]
    assert [dict(row) for row in rows(root).values()] == [dict(r) for r in before[1].values()]
    monkeypatch.undo()
    assert local.list_owned() == []  # not ours until the first write
    assert local.adopted_identifiers(adopted.outputs) == (LEGACY,)


def test_adopt_without_a_database_finds_nothing_and_creates_nothing(
    root: Path, local: LocalProvider, desired: dict[str, DesiredItem]
) -> None:
    assert local.adopt(request(desired[PROJECT]), PROJECT).exists is False
    assert not (root / ".trainform").exists()


def test_adopt_of_our_own_row_at_its_address_records_no_adoption(
    local: LocalProvider, desired: dict[str, DesiredItem]
) -> None:
    item = desired[PROJECT]
    local.create(resource(item))

    adopted = local.adopt(request(item), PROJECT)

    assert adopted.exists and adopted.outputs == {}


def test_adopt_of_an_unknown_object_or_another_kind_finds_nothing(
    local: LocalProvider, desired: dict[str, DesiredItem]
) -> None:
    item = desired[PROJECT]
    local.create(resource(desired["Image/host-python"]))

    assert local.adopt(request(item), "no-such-object").exists is False
    assert local.adopt(request(item), "Image/host-python").exists is False


def test_adopt_onto_an_address_that_holds_another_object_is_refused(
    root: Path, local: LocalProvider, legacy: LocalProvider, desired: dict[str, DesiredItem]
) -> None:
    item = desired[PROJECT]
    local.create(resource(item))
    legacy.create(resource(item, LEGACY, displayName="Legacy"))
    before = rows(root)

    with pytest.raises(ProviderError, match="an object already exists at Project/research"):
        local.adopt(request(item), LEGACY)

    assert {a: r["manager"] for a, r in rows(root).items()} == {
        a: r["manager"] for a, r in before.items()
    }


def test_an_adopted_object_is_observed_where_it_is_and_its_first_update_moves_it(
    root: Path, local: LocalProvider, legacy: LocalProvider, desired: dict[str, DesiredItem]
) -> None:
    item = desired[PROJECT]
    legacy.create(resource(item, LEGACY))
    marks = local.adopt(request(item), LEGACY).outputs
    original = rows(root)[LEGACY]

    assert local.observe([request(item, marks)])[PROJECT].live == item.document
    assert local.observe([request(item)])[PROJECT].exists is False  # no marks: not ours
    # a change made by its old manager after the import is drift of the adopted object
    legacy.update(resource(item, LEGACY, displayName="Renamed"), {})
    seen = local.observe([request(item, marks)])[PROJECT]
    assert seen.live is not None and seen.live["spec"]["displayName"] == "Renamed"

    outputs = local.update(resource(item, displayName="Ours"), marks)

    assert outputs == {}
    moved = rows(root)
    assert list(moved) == [PROJECT]
    row = moved[PROJECT]
    assert (row["rowid"], row["created_at"]) == (original["rowid"], original["created_at"])
    assert row["manager"] == "trainform" and row["name"] == "research"
    assert json.loads(row["document"])["spec"]["displayName"] == "Ours"
    assert local.list_owned() == [(PROJECT, "Project")]
    assert legacy.list_owned() == []
    assert local.observe([request(item, outputs)])[PROJECT].outputs == {}


def test_a_failed_move_leaves_the_adopted_row_as_it_was(
    root: Path, local: LocalProvider, legacy: LocalProvider, desired: dict[str, DesiredItem]
) -> None:
    item = desired[PROJECT]
    legacy.create(resource(item, LEGACY))
    marks = local.adopt(request(item), LEGACY).outputs
    before = dict(rows(root)[LEGACY])
    # a real fault inside the move's transaction, after the row was re-keyed
    connection = sqlite3.connect(root / ".trainform" / "platform.db")
    with connection:
        connection.execute(
            "CREATE TRIGGER fault AFTER UPDATE ON objects "
            "BEGIN SELECT RAISE(FAIL, 'injected fault'); END"
        )
    connection.close()

    with pytest.raises(sqlite3.IntegrityError, match="injected fault"):
        local.update(resource(item, displayName="Ours"), marks)

    assert {a: dict(r) for a, r in rows(root).items()} == {LEGACY: before}
    assert local.observe([request(item, marks)])[PROJECT].live == item.document


def test_delete_of_an_adopted_object_deletes_its_row_unless_it_was_replaced(
    root: Path, local: LocalProvider, legacy: LocalProvider, desired: dict[str, DesiredItem]
) -> None:
    item = desired[PROJECT]
    legacy.create(resource(item, LEGACY))
    marks = local.adopt(request(item), LEGACY).outputs

    replaced = {**marks, "adoptedCreatedAt": "2000-01-01T00:00:00Z"}
    with pytest.raises(PermanentProviderError, match="was replaced since the import"):
        local.delete(PROJECT, "Project", replaced)
    with pytest.raises(PermanentProviderError, match="was replaced since the import"):
        local.delete(PROJECT, "Queue", marks)  # the row is now another kind
    assert list(rows(root)) == [LEGACY]

    local.delete(PROJECT, "Project", marks)
    assert rows(root) == {}
    local.delete(PROJECT, "Project", marks)  # gone: deleting again succeeds


def test_an_adopted_dataset_keeps_its_recorded_manifests(
    root: Path, local: LocalProvider, legacy: LocalProvider, desired: dict[str, DesiredItem]
) -> None:
    item = desired["Dataset/tiny-corpus"]
    legacy.create(resource(item, "legacy-corpus"))
    marks = local.adopt(request(item), "legacy-corpus").outputs
    assert set(marks) == {"versions", "adopted", "adoptedCreatedAt"}
    (root / "data" / "tiny-corpus" / "v1" / "part-000.txt").write_text("edited\n")

    seen = local.observe([request(item, marks)])[item.address]
    assert [finding.kind for finding in seen.findings] == ["data-mutated"]
    with pytest.raises(PermanentProviderError, match="versions are immutable"):
        local.update(resource(item), marks)
    assert list(rows(root)) == ["legacy-corpus"]
