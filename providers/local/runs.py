"""The local platform's run store: one row per attempt of a training run or evaluation.

The `attempts` table lives in the platform database (platform.db) beside the `objects`
table, so admission reads queues and quotas and changes attempts in one transaction. The
provider (in the trainform process) inserts queued attempts; admission (in whichever
process calls it) starts them; each attempt's supervisor records its outcome. Every
writer that decides on capacity does so inside `transaction()` (BEGIN IMMEDIATE), so two
processes never start the same attempt or overcommit a queue.

Invariants: `id` is the attempt's identity (`<run>.<n>` for training,
`<run>.eval.<suite name>.<n>` for evaluations) and inserting it again changes nothing;
`phase` only moves queued -> running -> succeeded|failed|cancelled (or queued ->
cancelled); a `running` row always has `supervisor_pid` once committed; a finished row
has `ended_at` and a `cause` (providers/jobs.py Cause).

Timeline columns: `submitted_at` (inserted), `eligible_at` (a retry not before its
backoff), `admitted_at` (admission started it), `started_at` (its command started),
`ended_at`; `waits` is a JSON list of {reason, since, until} appended by admission when
a queued attempt's reason changes; `last_step` is the step the attempt reached (recorded
when it ends); `peak_rss` the command's peak resident memory in bytes; `host` where it ran;
`launchers` (a distributed attempt) a JSON list with one entry per node: {node, host, log,
startedAt, endedAt, exitCode}.
Databases made before a column existed get it on open (`ALTER TABLE ... ADD COLUMN`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainform.providers.jobs import utc_text
from trainform.providers.local.database import SCHEMA as OBJECTS_SCHEMA

SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    id               TEXT PRIMARY KEY,
    address          TEXT NOT NULL,
    run_id           TEXT NOT NULL,
    attempt          INTEGER NOT NULL,
    kind             TEXT NOT NULL,
    suite            TEXT,
    project          TEXT,
    queue            TEXT NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    cpu              TEXT NOT NULL,
    memory           TEXT NOT NULL,
    gpus             INTEGER NOT NULL DEFAULT 0,
    phase            TEXT NOT NULL,
    reason           TEXT NOT NULL DEFAULT '',
    launch           TEXT NOT NULL,
    workdir          TEXT NOT NULL,
    checkpoint_dir   TEXT NOT NULL,
    output_dir       TEXT NOT NULL,
    log_path         TEXT NOT NULL,
    metrics_file     TEXT NOT NULL DEFAULT '',
    resume_from      TEXT,
    supervisor_pid   INTEGER,
    child_pid        INTEGER,
    exit_code        INTEGER,
    metrics          TEXT,
    submitted_at     TEXT NOT NULL,
    started_at       TEXT NOT NULL DEFAULT '',
    ended_at         TEXT NOT NULL DEFAULT '',
    manager          TEXT NOT NULL,
    spec_root        TEXT NOT NULL DEFAULT '.',
    max_runtime      INTEGER,
    model_dir        TEXT NOT NULL DEFAULT '',
    devices          TEXT NOT NULL DEFAULT '',
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS attempts_address ON attempts(address);
CREATE INDEX IF NOT EXISTS attempts_phase ON attempts(phase);
CREATE TABLE IF NOT EXISTS checkpoint_checks (
    path        TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    status      TEXT NOT NULL
);
"""

ADDED_COLUMNS = {
    "eligible_at": "TEXT NOT NULL DEFAULT ''",
    "admitted_at": "TEXT NOT NULL DEFAULT ''",
    "waits": "TEXT NOT NULL DEFAULT '[]'",
    "cause": "TEXT NOT NULL DEFAULT ''",
    "last_step": "INTEGER",
    "peak_rss": "INTEGER",
    "host": "TEXT NOT NULL DEFAULT ''",
    "launchers": "TEXT NOT NULL DEFAULT '[]'",
}
"""Columns added after the first release of the table, with their definitions."""

UNFINISHED = ("queued", "running")
_BATCH = 500  # addresses per query: under SQLite's 999 bound variables
_JSON_FIELDS = ("launch", "metrics", "waits", "launchers")


def utc_now() -> str:
    """An ISO-8601 UTC timestamp with milliseconds (orders attempts submitted together)."""
    return utc_text(datetime.now(UTC))


def attempt_id(address: str, run_id: str, attempt: int, suite: str | None = None) -> str:
    """`<address>:<run>.<n>` for training, `<address>:<run>.eval.<suite>.<n>` for
    evaluations (`suite` is the suite's folder name)."""
    if suite is not None:
        return f"{address}:{run_id}.eval.{suite}.{attempt}"
    return f"{address}:{run_id}.{attempt}"


@dataclass
class Attempt:
    """One row of `attempts`; `launch` and `metrics` decoded from JSON."""

    id: str
    address: str
    run_id: str
    attempt: int
    kind: str
    queue: str
    cpu: str
    memory: str
    phase: str
    launch: dict[str, Any]
    workdir: str
    checkpoint_dir: str
    output_dir: str
    log_path: str
    submitted_at: str
    manager: str
    suite: str | None = None
    project: str | None = None
    priority: int = 0
    gpus: int = 0
    reason: str = ""
    metrics_file: str = ""
    resume_from: str | None = None
    supervisor_pid: int | None = None
    child_pid: int | None = None
    exit_code: int | None = None
    metrics: dict[str, Any] | None = None
    started_at: str = ""
    ended_at: str = ""
    spec_root: str = "."
    max_runtime: int | None = None
    model_dir: str = ""
    devices: str = ""
    cancel_requested: int = 0
    eligible_at: str = ""
    admitted_at: str = ""
    waits: list[dict[str, str]] = field(default_factory=list)
    cause: str = ""
    last_step: int | None = None
    peak_rss: int | None = None
    host: str = ""
    launchers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.phase not in UNFINISHED

    @property
    def nodes(self) -> int:
        """Nodes of the attempt's launch: `cpu` and `memory` are per node, `gpus` all of them."""
        nodes = self.launch.get("nodes")
        return nodes if isinstance(nodes, int) and nodes >= 1 else 1

    @property
    def code_dir(self) -> Path:
        """The snapshot of the code the attempt runs (its working directory)."""
        return Path(self.workdir) / "code"

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Attempt:
        values = {key: row[key] for key in row.keys() if key in _ATTEMPT_FIELDS}
        for key in _JSON_FIELDS:
            if values.get(key) is not None:
                values[key] = json.loads(values[key])
        return cls(**values)

    def to_row(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in _JSON_FIELDS:
            if values[key] is not None:
                values[key] = json.dumps(values[key], sort_keys=True)
        return values


_ATTEMPT_FIELDS = frozenset(f.name for f in fields(Attempt))


_LIGHT_COLUMNS = ", ".join(
    [
        *(name for name in sorted(_ATTEMPT_FIELDS) if name != "launch"),
        "json_object('nodes', json_extract(launch, '$.nodes'), 'procs_per_node', "
        "json_extract(launch, '$.procs_per_node'), 'checkpoint_store', "
        "json_extract(launch, '$.checkpoint_store')) AS launch",
    ]
)


class RunStore:
    """The attempts table; one connection per process, shared by its threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._connection = sqlite3.connect(
            path, timeout=30, isolation_level=None, check_same_thread=False
        )
        self._connection.row_factory = sqlite3.Row
        with self._lock:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.executescript(OBJECTS_SCHEMA + SCHEMA)
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """Bring a table made by an older trainform up to ADDED_COLUMNS (once, whoever
        opens the database first: the check is repeated inside the write transaction)."""
        if set(ADDED_COLUMNS) <= self._columns():
            return
        with self.transaction():
            present = self._columns()
            for name, definition in ADDED_COLUMNS.items():
                if name not in present:
                    self._connection.execute(f"ALTER TABLE attempts ADD COLUMN {name} {definition}")

    def _columns(self) -> set[str]:
        with self._lock:
            rows = self._connection.execute("PRAGMA table_info(attempts)").fetchall()
        return {row["name"] for row in rows}

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction taken up front (BEGIN IMMEDIATE): decide, then change."""
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")

    def insert(self, attempt: Attempt) -> bool:
        """Insert the attempt unless its id exists; True when it was inserted."""
        row = attempt.to_row()
        columns = ", ".join(row)
        marks = ", ".join("?" * len(row))
        with self._lock:
            cursor = self._connection.execute(
                f"INSERT OR IGNORE INTO attempts ({columns}) VALUES ({marks})", list(row.values())
            )
            return cursor.rowcount == 1

    def get(self, attempt_id: str) -> Attempt | None:
        with self._lock:
            row = self._connection.execute(
                "SELECT * FROM attempts WHERE id = ?", (attempt_id,)
            ).fetchone()
        return None if row is None else Attempt.from_row(row)

    def update(self, attempt_id: str, **changes: Any) -> None:
        for key in _JSON_FIELDS:
            if key in changes and changes[key] is not None:
                changes[key] = json.dumps(changes[key], sort_keys=True)
        assignments = ", ".join(f"{key} = ?" for key in changes)
        with self._lock:
            self._connection.execute(
                f"UPDATE attempts SET {assignments} WHERE id = ?", [*changes.values(), attempt_id]
            )

    def by_address(self, address: str, manager: str | None = None) -> list[Attempt]:
        """Attempts of one job, in submission order."""
        query = "SELECT * FROM attempts WHERE address = ?"
        arguments: list[Any] = [address]
        if manager is not None:
            query += " AND manager = ?"
            arguments.append(manager)
        return self._select(query + " ORDER BY submitted_at, rowid", arguments)

    def by_addresses(
        self, addresses: list[str], manager: str | None = None, light: bool = False
    ) -> dict[str, list[Attempt]]:
        """Attempts of many jobs in few queries: address -> attempts in submission order.

        `light` (reading status): each attempt's `launch` holds only `nodes`,
        `procs_per_node` and `checkpoint_store`, all a status reads of it; decoding whole
        launches is most of the cost of reading thousands of attempts."""
        found: dict[str, list[Attempt]] = {address: [] for address in addresses}
        columns = _LIGHT_COLUMNS if light else "*"
        for start in range(0, len(addresses), _BATCH):
            batch = addresses[start : start + _BATCH]
            marks = ", ".join("?" * len(batch))
            query = f"SELECT {columns} FROM attempts WHERE address IN ({marks})"
            arguments: list[Any] = list(batch)
            if manager is not None:
                query += " AND manager = ?"
                arguments.append(manager)
            for attempt in self._select(query + " ORDER BY submitted_at, rowid", arguments):
                found[attempt.address].append(attempt)
        return found

    def checkpoint_checks(self) -> dict[str, tuple[str, str]]:
        """Checkpoint validations recorded earlier: path -> (fingerprint, status JSON)."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT path, fingerprint, status FROM checkpoint_checks"
            ).fetchall()
        return {row["path"]: (row["fingerprint"], row["status"]) for row in rows}

    def record_checkpoint_checks(self, checks: list[tuple[str, str, str]]) -> None:
        """Remember validations (path, fingerprint, status JSON) in one transaction; a
        database this process cannot write only loses the saving."""
        if not checks:
            return
        try:
            with self.transaction():
                self._connection.executemany(
                    "INSERT OR REPLACE INTO checkpoint_checks (path, fingerprint, status) "
                    "VALUES (?, ?, ?)",
                    checks,
                )
        except sqlite3.Error:
            pass

    def in_phase(self, *phases: str) -> list[Attempt]:
        """Attempts in the phases, in admission order: priority (higher first), then age."""
        marks = ", ".join("?" * len(phases))
        return self._select(
            f"SELECT * FROM attempts WHERE phase IN ({marks}) "
            "ORDER BY priority DESC, submitted_at, rowid",
            list(phases),
        )

    def accounted(self, manager: str, since: str) -> list[Attempt]:
        """Every attempt of each run of `manager` that has an attempt ended at or after
        `since` (a time as `utc_text` writes it) or not ended, in submission order."""
        return self._select(
            "SELECT * FROM attempts WHERE manager = ? AND (address, run_id) IN ("
            "SELECT address, run_id FROM attempts WHERE manager = ? "
            "AND (ended_at >= ? OR phase IN ('queued', 'running'))) "
            "ORDER BY address, submitted_at, rowid",
            [manager, manager, since],
        )

    def queued(self) -> list[Attempt]:
        return self.in_phase("queued")

    def running(self) -> list[Attempt]:
        return self.in_phase("running")

    def platform_objects(self, kind: str) -> list[tuple[str, str | None, dict[str, Any]]]:
        """(address, project, document) of every platform object of a kind."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT address, project, document FROM objects WHERE kind = ? ORDER BY address",
                (kind,),
            ).fetchall()
        return [(row["address"], row["project"], json.loads(row["document"])) for row in rows]

    def platform_outputs(self, address: str) -> dict[str, Any] | None:
        """The outputs recorded for one platform object (a dataset's manifests), if any."""
        with self._lock:
            row = self._connection.execute(
                "SELECT outputs FROM objects WHERE address = ?", (address,)
            ).fetchone()
        return None if row is None else json.loads(row["outputs"])  # type: ignore[no-any-return]

    def _select(self, query: str, arguments: list[Any]) -> list[Attempt]:
        with self._lock:
            cursor = self._connection.execute(query, arguments)
            cursor.row_factory = None  # plain tuples: thousands of rows are read at once
            rows = cursor.fetchall()
            names = [column[0] for column in cursor.description]
        keep = [i for i, name in enumerate(names) if name in _ATTEMPT_FIELDS]
        decode = [i for i in keep if names[i] in _JSON_FIELDS]
        attempts = []
        for row in rows:
            values = {names[i]: row[i] for i in keep}
            for i in decode:
                if row[i] is not None:
                    values[names[i]] = json.loads(row[i])
            attempts.append(Attempt(**values))
        return attempts
