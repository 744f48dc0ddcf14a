"""The local platform's database: one SQLite file holding the objects trainform manages.

Each object row carries its manager and address (ownership), the normalized document as
applied, a generation counter and timestamps. WAL mode and a busy timeout let the CLI and
job supervisors share it.

`trainform import` writes nothing here: it reads with `read_rows` (a read-only connection)
and state records the row it adopted (`Adopted`); the first planned write `move`s that row
to its address and manager in one transaction, or `delete_adopted` removes it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    address     TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    project     TEXT,
    manager     TEXT NOT NULL,
    document    TEXT NOT NULL,
    outputs     TEXT NOT NULL DEFAULT '{}',
    generation  INTEGER NOT NULL DEFAULT 1,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS objects_kind ON objects(kind);
"""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True)
class ObjectRow:
    """An object row to write: its identity, ownership and encoded document and outputs."""

    address: str
    kind: str
    name: str
    project: str | None
    manager: str
    document: dict[str, Any]
    outputs: dict[str, Any]

    @property
    def encoded(self) -> str:
        return json.dumps(self.document, sort_keys=True)

    @property
    def encoded_outputs(self) -> str:
        return json.dumps(self.outputs, sort_keys=True)

    def columns(self) -> tuple[Any, ...]:
        """address, kind, name, project, manager, document, outputs: in table order."""
        return (
            self.address,
            self.kind,
            self.name,
            self.project,
            self.manager,
            self.encoded,
            self.encoded_outputs,
        )


@dataclass(frozen=True)
class Adopted:
    """The row `trainform import` adopted and no write has moved yet: stored as
    `identifier`, of `kind`, created at `created_at` (a row re-made since has another)."""

    identifier: str
    kind: str
    created_at: str

    def matches(self, row: sqlite3.Row | None) -> bool:
        return row is not None and (row["kind"], row["created_at"]) == (
            self.kind,
            self.created_at,
        )

    def check(self, row: sqlite3.Row | None) -> None:
        """LookupError unless `row` is the adopted row."""
        if row is None:
            raise LookupError(f"the imported object {self.identifier} is gone")
        if not self.matches(row):
            raise LookupError(
                f"the imported object {self.identifier} was replaced since the import (now a "
                f"{row['kind']} created at {row['created_at']})"
            )


class PlatformDatabase:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(path, timeout=30, check_same_thread=False)
        self._connection.row_factory = sqlite3.Row
        with self._lock:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def get_many(self, addresses: Iterable[str]) -> dict[str, sqlite3.Row]:
        wanted = list(addresses)
        rows: dict[str, sqlite3.Row] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for row in self._connection.execute(
                    f"SELECT * FROM objects WHERE address IN ({marks})", chunk
                ):
                    rows[row["address"]] = row
        return rows

    def upsert(self, row: ObjectRow) -> int:
        """Insert `row`, or update this manager's row at its address (PermissionError if
        another manager's object is there); its generation."""
        with self._lock, self._connection:
            return self._put(row)

    def _put(self, row: ObjectRow) -> int:
        """Insert or update `row` (inside the caller's transaction); its generation."""
        now = _now()
        current = self._connection.execute(
            "SELECT manager, generation, document FROM objects WHERE address = ?", (row.address,)
        ).fetchone()
        if current is None:
            self._connection.execute(
                "INSERT INTO objects (address, kind, name, project, manager, document, "
                "outputs, generation, created_at, updated_at) VALUES (?,?,?,?,?,?,?,1,?,?)",
                (*row.columns(), now, now),
            )
            return 1
        if current["manager"] != row.manager:
            raise PermissionError(
                f"{row.address} is managed by {current['manager']!r}, not {row.manager!r}"
            )
        generation = int(current["generation"]) + (current["document"] != row.encoded)
        self._connection.execute(
            "UPDATE objects SET document = ?, outputs = ?, generation = ?, updated_at = ? "
            "WHERE address = ?",
            (row.encoded, row.encoded_outputs, generation, now, row.address),
        )
        return generation

    def delete(self, address: str, manager: str) -> None:
        with self._lock, self._connection:
            self._connection.execute(
                "DELETE FROM objects WHERE address = ? AND manager = ?", (address, manager)
            )

    def owned(self, manager: str) -> list[tuple[str, str]]:
        with self._lock:
            return [
                (row["address"], row["kind"])
                for row in self._connection.execute(
                    "SELECT address, kind FROM objects WHERE manager = ? ORDER BY address",
                    (manager,),
                )
            ]

    def move(self, adopted: Adopted, row: ObjectRow) -> int:
        """The first write of an imported object, in one transaction: the adopted row
        (whoever manages it) becomes `row`: its address, this manager, the new document and
        outputs, keeping its identity (rowid, created_at). A row this manager already has at
        the address (a move whose outcome never reached state) is updated in place instead.
        LookupError when the adopted row is gone or was replaced; PermissionError when
        another manager's object holds the address."""
        identifier, address = adopted.identifier, row.address
        with self._lock, self._connection:
            target = self._connection.execute(
                "SELECT manager FROM objects WHERE address = ?", (address,)
            ).fetchone()
            if identifier != address and target is not None:
                return self._put(row)  # ours: updated; another manager's: PermissionError
            current = self._connection.execute(
                "SELECT * FROM objects WHERE address = ?", (identifier,)
            ).fetchone()
            adopted.check(current)
            generation = int(current["generation"]) + (current["document"] != row.encoded)
            self._connection.execute(
                "UPDATE objects SET address = ?, kind = ?, name = ?, project = ?, manager = ?, "
                "document = ?, outputs = ?, generation = ?, updated_at = ? WHERE address = ?",
                (*row.columns(), generation, _now(), identifier),
            )
            return generation

    def delete_adopted(self, adopted: Adopted) -> None:
        """Delete the row an import adopted and no write moved yet, whoever manages it;
        LookupError if it was replaced since the import."""
        with self._lock, self._connection:
            current = self._connection.execute(
                "SELECT * FROM objects WHERE address = ?", (adopted.identifier,)
            ).fetchone()
            if current is None:
                return
            adopted.check(current)
            self._connection.execute("DELETE FROM objects WHERE address = ?", (adopted.identifier,))


def read_rows(path: Path, addresses: Iterable[str] | None = None) -> dict[str, sqlite3.Row]:
    """The rows stored under `addresses` (every row when None), through a read-only
    connection: what `trainform import` reads with. No schema, pragma or migration runs, so
    the database file stays byte for byte as it was (SQLite may add its -wal and -shm side
    files), and a database that does not exist is not created (no rows)."""
    if not path.is_file():
        return {}
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    connection.row_factory = sqlite3.Row
    try:
        if addresses is None:
            found = connection.execute("SELECT * FROM objects ORDER BY address")
        else:
            wanted = list(addresses)
            marks = ",".join("?" * len(wanted))
            found = connection.execute(f"SELECT * FROM objects WHERE address IN ({marks})", wanted)
        return {row["address"]: row for row in found}
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}
        raise
    finally:
        connection.close()
