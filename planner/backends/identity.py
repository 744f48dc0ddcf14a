"""What a backend last wrote (lineage and serial), and the refusals that protect it.

Every backend keeps, beside the state document, a small identity record written right
after each document write. Reading compares the document found with that record and
refuses, before anything is planned:

- a document of another lineage (another workspace's state copied over this one);
- a document whose serial went backwards (a backup or an older copy put back);
- no document while the record, backups or a journal say one existed.

Two witnesses back the record up, so that it is no single point of failure: the backups
kept beside the document, and the state the newest audit record saw (the audit head,
planner.audit_chain). A missing record while either says a state was written is itself a
refusal with the way back, and a document older than what the audit trail saw is refused
even when the record was rolled back with it.

A document ahead of the record is accepted: a crash between the document write and the
record write leaves exactly that. `--accept-state` (or `trainform state accept`) makes a
deliberate swap the new baseline and records it in the identity's history.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from trainform.planner.state import State, StateError

HISTORY_LIMIT = 20


class AcceptRequest:
    """Set by `--accept-state` for this process: the next identity refusal is accepted."""

    reason: str | None = None


class StateIdentityError(StateError):
    """The state found is not the one this backend last wrote."""

    def __init__(self, location: str, found: str, expected: str, remedy: str) -> None:
        self.found = found
        self.expected = expected
        super().__init__(
            f"cannot use state {location}: found {found}, expected {expected}. Nothing was "
            f"changed. {remedy}"
        )


@dataclass
class Identity:
    lineage: str
    serial: int
    written: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": 1,
            "lineage": self.lineage,
            "serial": self.serial,
            "written": self.written,
            "history": self.history[-HISTORY_LIMIT:],
        }

    @classmethod
    def from_json(cls, data: Any) -> Identity | None:
        if not isinstance(data, dict) or not isinstance(data.get("lineage"), str):
            return None
        serial = data.get("serial")
        if not isinstance(serial, int):
            return None
        history = data.get("history") if isinstance(data.get("history"), list) else []
        return cls(data["lineage"], serial, str(data.get("written", "")), list(history))

    def advanced(self, state: State) -> Identity:
        return Identity(state.lineage, state.serial, _now(), self.history)

    def accepted(self, state: State | None, reason: str) -> Identity:
        entry = {
            "time": _now(),
            "event": "accept-state",
            "reason": reason,
            "from": {"lineage": self.lineage, "serial": self.serial},
            "to": {"lineage": state.lineage, "serial": state.serial} if state else None,
        }
        lineage = state.lineage if state else ""
        serial = state.serial if state else 0
        return Identity(lineage, serial, _now(), [*self.history, entry])


def first_identity(state: State) -> Identity:
    return Identity(state.lineage, state.serial, _now())


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _restore_hint(backups: list[tuple[int, str, int]], lineage: str, serial: int) -> str:
    """The restore command for the newest backup that matches what was last written."""
    for generation, backup_lineage, backup_serial in backups:
        if backup_lineage == lineage and backup_serial >= serial:
            return (
                f"Backup {generation} holds lineage {backup_lineage} serial {backup_serial}: "
                f"run `trainform state restore {generation}`"
            )
    for generation, backup_lineage, backup_serial in backups:
        if backup_lineage == lineage:
            return (
                f"The newest backup of this lineage is {generation} (serial {backup_serial}): "
                f"run `trainform state restore {generation}`"
            )
    return "No backup of this lineage is left"


def check_identity(
    location: str,
    found: State | None,
    recorded: Identity | None,
    backups: list[tuple[int, str, int]],
    journal_exists: bool,
    witness: tuple[str, int] | None = None,
) -> None:
    """Raise StateIdentityError if `found` is not what this backend last wrote.

    `backups` lists (generation, lineage, serial) of the backup generations still kept,
    newest first; `witness` is the (lineage, serial) the newest audit record saw."""
    accept = (
        "If this is deliberate, run the command again with `--accept-state` (or "
        "`trainform state accept`): the swap is recorded"
    )
    if recorded is not None and not recorded.lineage:
        return  # an accepted fresh start: whatever state comes next is the baseline
    if found is None:
        if recorded is None and not backups and not journal_exists and witness is None:
            return
        what = []
        if witness is not None:
            what.append(f"the audit trail saw lineage {witness[0]} serial {witness[1]}")
        if recorded is not None:
            what.append(f"lineage {recorded.lineage} serial {recorded.serial} was last written")
        if backups:
            what.append(
                f"{len(backups)} backup generation{' exists' if len(backups) == 1 else 's exist'}"
            )
        if journal_exists:
            what.append("a journal exists")
        lineage = recorded.lineage if recorded else (backups[0][1] if backups else "")
        serial = recorded.serial if recorded else 0
        raise StateIdentityError(
            location,
            "no state document",
            f"a state document ({'; '.join(what)})",
            f"{_restore_hint(backups, lineage, serial)}. To start from empty state on "
            "purpose, run the command again with `--accept-state` (or `trainform state "
            "accept`): that is recorded.",
        )
    if recorded is None:
        refuse_missing_record(location, found, backups, witness)
        return
    if found.lineage != recorded.lineage:
        raise StateIdentityError(
            location,
            f"lineage {found.lineage} serial {found.serial}",
            f"lineage {recorded.lineage} (serial {recorded.serial} was last written here): "
            "this is another workspace's state",
            f"{_restore_hint(backups, recorded.lineage, recorded.serial)}. {accept}.",
        )
    if found.serial < recorded.serial:
        raise StateIdentityError(
            location,
            f"serial {found.serial}",
            f"serial {recorded.serial} or later (lineage {recorded.lineage}): the state went "
            "backwards, as when a backup or an old copy is put back",
            f"{_restore_hint(backups, recorded.lineage, recorded.serial)}. {accept}.",
        )

    if witness is not None and witness[0] == found.lineage and found.serial < witness[1]:
        raise StateIdentityError(
            location,
            f"serial {found.serial}",
            f"serial {witness[1]} or later (lineage {found.lineage}): the audit trail saw "
            "that serial, so the state and its identity record were both put back",
            f"{_restore_hint(backups, found.lineage, witness[1])}. {accept}.",
        )


def refuse_missing_record(
    location: str,
    found: State,
    backups: list[tuple[int, str, int]],
    witness: tuple[str, int] | None,
) -> None:
    """No identity record beside a document: fine on a first write, an error once the
    backups or the audit trail show that states were written here before."""
    seen = []
    if witness is not None:
        seen.append(f"the audit trail saw lineage {witness[0]} serial {witness[1]}")
    if backups:
        generation, lineage, serial = backups[0]
        seen.append(f"backup {generation} holds lineage {lineage} serial {serial}")
    if not seen:
        return
    lineage, serial = witness or (backups[0][1], backups[0][2])
    raise StateIdentityError(
        location,
        f"lineage {found.lineage} serial {found.serial} with no identity record",
        f"the identity record written beside it ({'; '.join(seen)})",
        "The record was deleted, or the state was swapped with it. If the state found is "
        "the right one, run `trainform state accept --reason WHY` to write the record "
        f"anew (recorded); otherwise put the right state back: "
        f"{_restore_hint(backups, lineage, serial)}.",
    )
