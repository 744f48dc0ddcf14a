"""The local platform's database: one SQLite file holding the objects trainform manages.

Each object row carries its manager and address (ownership), the normalized document as
applied, a generation counter and timestamps. WAL mode and a busy timeout let the CLI and
job supervisors share it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable
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

    def upsert(
        self,
        address: str,
        kind: str,
        name: str,
        project: str | None,
        manager: str,
        document: dict[str, Any],
        outputs: dict[str, Any],
    ) -> int:
        now = _now()
        encoded = json.dumps(document, sort_keys=True)
        encoded_outputs = json.dumps(outputs, sort_keys=True)
        with self._lock, self._connection:
            row = self._connection.execute(
                "SELECT manager, generation, document FROM objects WHERE address = ?", (address,)
            ).fetchone()
            if row is None:
                self._connection.execute(
                    "INSERT INTO objects (address, kind, name, project, manager, document, "
                    "outputs, generation, created_at, updated_at) VALUES (?,?,?,?,?,?,?,1,?,?)",
                    (address, kind, name, project, manager, encoded, encoded_outputs, now, now),
                )
                return 1
            if row["manager"] != manager:
                raise PermissionError(
                    f"{address} is managed by {row['manager']!r}, not {manager!r}"
                )
            generation = int(row["generation"]) + (row["document"] != encoded)
            self._connection.execute(
                "UPDATE objects SET document = ?, outputs = ?, generation = ?, updated_at = ? "
                "WHERE address = ?",
                (encoded, encoded_outputs, generation, now, address),
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

    def everything(self) -> list[sqlite3.Row]:
        """Every object (address, kind, name, project, document), whoever manages it."""
        with self._lock:
            return list(
                self._connection.execute(
                    "SELECT address, kind, name, project, document FROM objects ORDER BY address"
                )
            )

    def adopt(self, identifier: str, address: str, kind: str, manager: str) -> bool:
        """Re-key the object stored as `identifier` to `address`, owned by `manager`."""
        with self._lock, self._connection:
            row = self._connection.execute(
                "SELECT kind FROM objects WHERE address = ?", (identifier,)
            ).fetchone()
            if row is None or row["kind"] != kind:
                return False
            self._connection.execute(
                "UPDATE objects SET address = ?, manager = ?, updated_at = ? WHERE address = ?",
                (address, manager, _now(), identifier),
            )
            return True
