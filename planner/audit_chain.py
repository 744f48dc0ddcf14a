"""The audit trail as a hash chain: every record names the digest of the one before it.

A chained record carries `sequence` (1, 2, 3, ... with no gap), `previous` (the digest of
record `sequence - 1`, or GENESIS for the first) and `digest` (sha256 of its own canonical
JSON without `digest`). The backend also keeps the head (sequence and digest of the last
record) beside the trail, so that removing the newest records is found too. Records from
before the chain existed (no `sequence`) may only precede it; they are reported as
unchained. Called by the state backends (planner.backends) when they append and verify.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from trainform.planner.state import canonical_json

GENESIS = "sha256:" + "0" * 64


@dataclass(frozen=True)
class AuditHead:
    """The last record of a trail, and the state it last saw (a witness of the state's
    identity beside the identity record and the backups)."""

    sequence: int
    digest: str
    lineage: str | None = field(default=None, compare=False)
    serial: int | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "digest": self.digest,
            "lineage": self.lineage,
            "serial": self.serial,
        }

    @classmethod
    def from_json(cls, data: Any) -> AuditHead | None:
        if not isinstance(data, dict):
            return None
        sequence, digest = data.get("sequence"), data.get("digest")
        if not isinstance(sequence, int) or not isinstance(digest, str):
            return None
        lineage, serial = data.get("lineage"), data.get("serial")
        return cls(
            sequence,
            digest,
            lineage if isinstance(lineage, str) else None,
            serial if isinstance(serial, int) else None,
        )

    def witness(self) -> tuple[str, int] | None:
        """(lineage, serial) of the state the newest record saw, if it saw one."""
        if self.lineage and self.serial is not None:
            return self.lineage, self.serial
        return None


def state_seen(record: dict[str, Any]) -> tuple[str | None, int | None]:
    """The lineage and serial a record says the state had when it was written."""
    state = record.get("state")
    if not isinstance(state, dict) or not isinstance(state.get("lineage"), str):
        return None, None
    for name in ("serialAfter", "serial"):
        if isinstance(state.get(name), int):
            return state["lineage"], state[name]
    return state["lineage"], None


EMPTY_HEAD = AuditHead(0, GENESIS)


def record_digest(record: dict[str, Any]) -> str:
    body = {key: value for key, value in record.items() if key != "digest"}
    return "sha256:" + hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def chained(record: dict[str, Any], head: AuditHead) -> tuple[dict[str, Any], AuditHead]:
    """`record` as the next link after `head`, and the head after it."""
    linked = {**record, "sequence": head.sequence + 1, "previous": head.digest}
    linked["digest"] = record_digest(linked)
    lineage, serial = state_seen(record)
    if lineage is None:
        lineage, serial = head.lineage, head.serial
    return linked, AuditHead(linked["sequence"], linked["digest"], lineage, serial)


def head_of(records: list[dict[str, Any]]) -> AuditHead:
    """The head a trail ends at (its last chained record), read from the records."""
    for record in reversed(records):
        if isinstance(record.get("sequence"), int) and isinstance(record.get("digest"), str):
            return AuditHead(record["sequence"], record["digest"], *state_seen(record))
    return EMPTY_HEAD


@dataclass
class AuditVerdict:
    records: int
    chained: int
    unchained: int
    problems: list[str]

    @property
    def intact(self) -> bool:
        return not self.problems


def verify_chain(
    records: list[tuple[str, dict[str, Any] | None]], head: AuditHead | None
) -> AuditVerdict:
    """Check a trail: `records` are (where, parsed record or None when unreadable), in the
    order stored; `head` what the backend recorded as its last record."""
    problems: list[str] = []
    expected = EMPTY_HEAD
    unchained = 0
    last = "the trail"
    for where, record in records:
        last = where
        if record is None:
            problems.append(f"{where}: not a readable record (garbage or a torn write)")
            continue
        if "sequence" not in record:
            if expected.sequence:
                problems.append(f"{where}: an unchained record after the chain began (inserted)")
            unchained += 1
            continue
        problems += link_problems(where, record, expected)
        if isinstance(record.get("sequence"), int) and isinstance(record.get("digest"), str):
            expected = AuditHead(record["sequence"], record["digest"])
    if head is None and expected.sequence:
        problems.append("the head record of the trail is missing (records may be cut off)")
    elif head is not None and head != expected:
        problems.append(
            f"{last}: the trail ends at record {expected.sequence} but its head names record "
            f"{head.sequence} ({head.digest[:19]}): records were removed or replaced"
        )
    return AuditVerdict(len(records), len(records) - unchained, unchained, problems)


def link_problems(where: str, record: dict[str, Any], expected: AuditHead) -> list[str]:
    problems = []
    sequence = record.get("sequence")
    if sequence != expected.sequence + 1:
        problems.append(
            f"{where}: record {sequence} follows record {expected.sequence} "
            "(a record was removed or inserted)"
        )
    if record.get("previous") != expected.digest:
        problems.append(f"{where}: record {sequence} does not name the digest of the one before")
    if record.get("digest") != record_digest(record):
        problems.append(f"{where}: record {sequence} was edited (its digest does not match)")
    return problems
