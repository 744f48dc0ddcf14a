"""Errors of the queueing simulation.

Tree of errors raised by this package:

    QueueingError               root: everything `policies.queueing` raises derives from it
    +-- TraceError              a job trace (CSV, JSONL or sacct JSON) cannot be read;
                                names the file, the line and the field
"""

from __future__ import annotations


class QueueingError(Exception):
    """Root of the queueing simulation's errors."""


class TraceError(QueueingError):
    """A trace that cannot be read: where (file:line), which field, what was found."""

    def __init__(self, file: str, line: int, field: str, message: str) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.message = message
        where = f"{file}:{line}" if line else file
        about = f" field {field!r}:" if field else ""
        super().__init__(f"cannot read trace {where}:{about} {message}")
