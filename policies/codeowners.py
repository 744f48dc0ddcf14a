"""CODEOWNERS: who must approve a change to which path, as the code host enforces it.

`policies.trusted.load_trusted` reads the file from a trusted folder only (the `--policies`
checkout in CI, the base side of a review, the spec folder on a laptop) with
`find_code_owners`; tenancy findings (policies.builtin.isolation) then name the owners
whose approval a denied document needs. Patterns are matched against paths relative to the
spec folder, so the file belongs in the spec folder (or in `.github/` or `docs/` below it),
as it does when the spec folder is the repository root.

Syntax as GitHub and GitLab read it: one `pattern owner...` per line, `#` comments, the last
matching line wins, a line without owners makes the path unowned. Patterns are matched by
policies.globs, the one matcher `adminPaths` and `specPaths` use too (its docstring has the
rules: `*` within one segment, `**` across segments, anchored when a `/` starts or sits in
the pattern, `docs/*` the folder's direct entries only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from trainform.policies.globs import PathGlob, compile_glob, normalize_path, probe_path

FILE_NAME = "CODEOWNERS"
# Where code hosts look for the file, in GitHub's order.
PLACES = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
MAX_BYTES = 1_000_000


__all__ = ["CodeOwners", "OwnerRule", "find_code_owners", "parse_code_owners", "probe_path"]


@dataclass(frozen=True)
class OwnerRule:
    """One CODEOWNERS line: its pattern, owners and 1-based line number."""

    pattern: str
    owners: tuple[str, ...]
    glob: PathGlob
    line: int = 0

    def describe(self) -> str:
        """The line as written (`/teams/alignment/ @alignment-leads`)."""
        return " ".join([self.pattern, *self.owners])


@dataclass(frozen=True)
class CodeOwners:
    """The rules of one CODEOWNERS file (none: no file was found)."""

    rules: tuple[OwnerRule, ...] = ()
    source: str = ""

    @cached_property
    def _last_match(self) -> re.Pattern[str]:
        """Every rule's pattern, last line first, as one alternation: a full match takes the
        first branch that matches the whole path, i.e. the last matching line."""
        branches = [
            f"(?P<r{index}>{rule.glob.regex.pattern})"
            for index, rule in reversed(list(enumerate(self.rules)))
        ]
        return re.compile("|".join(branches) or "(?!)", re.DOTALL)

    def rule_for(self, path: str) -> OwnerRule | None:
        """The line deciding who owns `path` (relative, `/`-separated): the last matching."""
        found = self._last_match.fullmatch(normalize_path(path))
        if found is None or found.lastgroup is None:
            return None
        return self.rules[int(found.lastgroup[1:])]

    def owners_of(self, path: str) -> tuple[str, ...]:
        """Owners of `path` (relative, `/`-separated): the last matching rule's; () if none."""
        rule = self.rule_for(path)
        return rule.owners if rule is not None else ()


def parse_code_owners(text: str, source: str = "") -> CodeOwners:
    """The rules of a CODEOWNERS text; malformed lines (no pattern) are skipped."""
    rules = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or line.startswith("["):
            continue
        pattern, *owners = line.split()
        rules.append(OwnerRule(pattern, tuple(owners), compile_glob(pattern), number))
    return CodeOwners(tuple(rules), source)


def find_code_owners(folders: Iterable[Path]) -> CodeOwners:
    """The first CODEOWNERS file found in `folders` (each in GitHub's places); none: empty.

    Only a regular file is read (not a symlink, FIFO or device), and at most MAX_BYTES."""
    for folder in folders:
        for place in PLACES:
            candidate = folder / place
            if candidate.is_symlink() or not candidate.is_file():
                continue
            try:
                with candidate.open("rb") as handle:
                    data = handle.read(MAX_BYTES)
            except OSError:
                continue
            return parse_code_owners(data.decode("utf-8", "replace"), candidate.as_posix())
    return CodeOwners()
