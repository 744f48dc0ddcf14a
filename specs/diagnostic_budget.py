"""The diagnostics one run builds: the first MAX_DIAGNOSTICS_PER_RUN, then only a count.

specs.loader makes one `DiagnosticBudget` per load; every step of the load adds its
diagnostics to it (`append`, `extend`), and the steps that can tell how many problems they
found without building them (a document's validation errors past the budget) only `omit`
them. Once the budget is spent nothing more is kept: a run over thousands of broken files
holds and prints a thousand diagnostics and one line counting the rest, and
specs.loaded_files stops working out exact positions (`spent`), which is what made such a
run slow and large. The per-file cap (specs.errors.cap_per_file) still applies to what
is kept.

Invariants: an omitted error makes the count line an error, so a run never passes because
its errors were not shown; the count line has no location and sorts after every other
diagnostic (specs.errors.Diagnostic.sort_key); the diagnostics kept are the first to arrive
(files in discovery order, then references), sorted by file and line when the load ends.
The count is a floor ("at least") when some problems were only counted: a document past
the budget is validated for its count, but `yaml-number` warnings, which need a walk of
the text, are not looked for past it (as past a file's room). The CLI uses `cap_per_run`
for what it adds after a load (tenancy, shared writes) and for `fmt`'s problems.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainform.specs.errors import RUN_LIMIT_CODE, Diagnostic, Severity, plural

MAX_DIAGNOSTICS_PER_RUN = 1_000
"""Diagnostics one run builds and shows; past them, problems are only counted."""


class DiagnosticBudget:
    """The diagnostics of a run kept so far (at most `limit`) and a count of the rest."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_DIAGNOSTICS_PER_RUN if limit is None else limit
        self.kept: list[Diagnostic] = []
        self.omitted = 0
        self.omitted_error = False
        self.counted_only = False  # some omitted problems were counted, never built

    @property
    def room(self) -> int:
        """How many more diagnostics are kept."""
        return self.limit - len(self.kept)

    @property
    def spent(self) -> bool:
        return len(self.kept) >= self.limit

    def append(self, diagnostic: Diagnostic) -> None:
        if len(self.kept) < self.limit:
            self.kept.append(diagnostic)
            return
        self.omitted += 1
        self.omitted_error = self.omitted_error or diagnostic.severity is Severity.ERROR

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        for diagnostic in diagnostics:
            self.append(diagnostic)

    def omit(self, count: int, error: bool = True) -> None:
        """Count `count` problems found but never built into diagnostics."""
        if count > 0:
            self.omitted += count
            self.omitted_error = self.omitted_error or error
            self.counted_only = True

    def count_line(self) -> Diagnostic | None:
        """The diagnostic counting what was not kept, or None when everything was."""
        if not self.omitted:
            return None
        return omitted_line(self.omitted, self.omitted_error, self.limit, self.counted_only)


def omitted_line(count: int, error: bool, limit: int, at_least: bool = False) -> Diagnostic:
    """The last diagnostic of a run that showed only its first `limit`: how many more."""
    return Diagnostic(
        Severity.ERROR if error else Severity.WARNING,
        RUN_LIMIT_CODE,
        f"{'at least ' if at_least else ''}{plural(count, 'more problem')} not shown",
        None,
        expected=f"at most {limit:,} diagnostics shown per run",
        found=f"{limit + count:,}" + (" or more" if at_least else ""),
        detail="fix the problems shown and run again to see the rest",
    )


def cap_per_run(diagnostics: list[Diagnostic], limit: int | None = None) -> list[Diagnostic]:
    """The first `limit` of `diagnostics` (MAX_DIAGNOSTICS_PER_RUN), then one counting the
    rest (an error when an error was left out); `diagnostics` itself when it fits."""
    limit = MAX_DIAGNOSTICS_PER_RUN if limit is None else limit
    if len(diagnostics) <= limit:
        return diagnostics
    shown, rest = diagnostics[:limit], diagnostics[limit:]
    error = any(d.severity is Severity.ERROR for d in rest)
    return [*shown, omitted_line(len(rest), error, limit)]
