"""Errors and diagnostics of the spec language.

Tree of errors raised by this package:

    SpecError                      root: everything `specs` raises derives from it
    +-- SpecLoadError              a load produced error diagnostics; carries all of them
    +-- SpecUsageError             bad arguments from the caller (missing folder, bad --var)
    +-- FileWriteError             a file could not be written (full disk); none left half-written

A `Diagnostic` is a value, not an exception: the loader collects every diagnostic of a
run and raises once, so a user sees all problems together, sorted by file and line, at
most MAX_DIAGNOSTICS_PER_FILE per file (`cap_per_file`), then one counting the rest, and
at most specs.diagnostic_budget.MAX_DIAGNOSTICS_PER_RUN in all (the run's budget).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

RUN_LIMIT_CODE = "too-many-diagnostics"
"""The code of the diagnostics counting those not shown (per file, and per run)."""


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Location:
    """Where in the sources a diagnostic points: 1-based line and column."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if not self.line:
            return self.file
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found in the specs, with enough context to fix it without guessing."""

    severity: Severity
    code: str
    summary: str
    location: Location | None = None
    field: str = ""
    expected: str = ""
    found: str = ""
    suggestion: str = ""
    address: str = ""
    related: tuple[Location, ...] = ()
    detail: str = ""

    def sort_key(self) -> tuple[bool, str, int, int, str, str]:
        """By file, line and column; the count of a run's diagnostics not shown last."""
        loc = self.location or Location("")
        last = self.location is None and self.code == RUN_LIMIT_CODE
        return (last, loc.file, loc.line, loc.column, self.code, self.summary)

    def as_dict(self) -> dict[str, Any]:
        def loc(item: Location | None) -> dict[str, Any] | None:
            if item is None:
                return None
            return {"file": item.file, "line": item.line, "column": item.column}

        return {
            "severity": self.severity.value,
            "code": self.code,
            "summary": self.summary,
            "location": loc(self.location),
            "field": self.field,
            "expected": self.expected,
            "found": self.found,
            "suggestion": self.suggestion,
            "address": self.address,
            "related": [loc(item) for item in self.related],
            "detail": self.detail,
        }


class SpecError(Exception):
    """Root of every error raised by the `specs` package."""


class SpecUsageError(SpecError):
    """The caller asked for something that cannot be done (missing folder, malformed --var)."""


class FileWriteError(SpecError):
    """A file could not be written (specs.file_writes): `path` and the system's reason."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot write {path}: {reason}")


@dataclass
class SpecLoadError(SpecError):
    """Loading found at least one error; `diagnostics` holds all of them, sorted."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.diagnostics = sorted(self.diagnostics, key=Diagnostic.sort_key)
        super().__init__(self.__str__())

    def __str__(self) -> str:
        errors = [d for d in self.diagnostics if d.severity is Severity.ERROR]
        first = errors[0] if errors else None
        where = f" ({first.location}: {first.summary})" if first and first.location else ""
        return f"cannot load specs: {plural(len(errors), 'error')}{where}"


MAX_DIAGNOSTICS_PER_FILE = 100


def cap_per_file(
    diagnostics: list[Diagnostic],
    uncounted: dict[str, int] | None = None,
    limit: int = MAX_DIAGNOSTICS_PER_FILE,
) -> list[Diagnostic]:
    """The first `limit` diagnostics of each file (by line), then one counting the rest.

    `uncounted` holds, per file, problems found but never built into diagnostics (the
    loader stops building them once a file is over the limit); they join the count. The
    count is an error when any error was left out, so capping never hides a failure.
    """
    uncounted = uncounted or {}
    by_file: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        by_file.setdefault(diagnostic.location.file if diagnostic.location else "", []).append(
            diagnostic
        )
    if all(len(group) <= limit for group in by_file.values()) and not any(uncounted.values()):
        return diagnostics
    result: list[Diagnostic] = []
    for file, group in by_file.items():
        group.sort(key=Diagnostic.sort_key)
        shown, rest = group[:limit], group[limit:]
        last = shown[-1] if shown else None
        result += shown
        more = len(rest) + uncounted.get(file, 0)
        if not more:
            continue
        error = uncounted.get(file, 0) > 0 or any(d.severity is Severity.ERROR for d in rest)
        result.append(
            Diagnostic(
                Severity.ERROR if error else Severity.WARNING,
                RUN_LIMIT_CODE,
                f"{'at least ' if uncounted.get(file) else ''}{plural(more, 'more problem')} "
                "in this file not shown",
                last.location if last is not None and last.location else Location(file),
                expected=f"at most {limit} diagnostics shown per file",
                found=f"{len(group) + uncounted.get(file, 0):,}"
                + (" or more" if uncounted.get(file) else ""),
                detail="fix the problems shown and run again to see the rest",
            )
        )
    for file, count in uncounted.items():
        if count and file not in by_file:
            result.append(
                Diagnostic(
                    Severity.ERROR,
                    RUN_LIMIT_CODE,
                    f"{plural(count, 'problem')} in this file not shown",
                    Location(file),
                    expected=f"at most {limit} diagnostics shown per file",
                )
            )
    return result


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"
