"""CODEOWNERS: who must approve a change to which path, as the code host enforces it.

`policies.trusted.load_trusted` reads the file from a trusted folder only (the `--policies`
checkout in CI, the base side of a review, the spec folder on a laptop) with
`find_code_owners`; tenancy findings (policies.builtin.isolation) then name the owners
whose approval a denied document needs. Patterns are matched against paths relative to the
spec folder, so the file belongs in the spec folder (or in `.github/` or `docs/` below it),
as it does when the spec folder is the repository root.

Syntax as GitHub and GitLab read it: one `pattern owner...` per line, `#` comments, the last
matching line wins, a line without owners makes the path unowned. A pattern starting with
`/` or holding a `/` before its end is anchored at the root, otherwise it matches at any
depth; a trailing `/` means everything below that folder; `*` matches within one path
segment, `**` across segments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "CODEOWNERS"
# Where code hosts look for the file, in GitHub's order.
PLACES = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class OwnerRule:
    pattern: str
    owners: tuple[str, ...]
    regex: re.Pattern[str]


@dataclass(frozen=True)
class CodeOwners:
    """The rules of one CODEOWNERS file (none: no file was found)."""

    rules: tuple[OwnerRule, ...] = ()
    source: str = ""

    def owners_of(self, path: str) -> tuple[str, ...]:
        """Owners of `path` (relative, `/`-separated): the last matching rule's; () if none."""
        path = path.removeprefix("./").lstrip("/")
        for rule in reversed(self.rules):
            if rule.regex.match(path):
                return rule.owners
        return ()


def _translate(pattern: str) -> re.Pattern[str]:
    directory = pattern.endswith("/")
    body = pattern.strip("/")
    anchored = pattern.startswith("/") or "/" in body
    parts: list[str] = []
    index = 0
    while index < len(body):
        if body.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
        elif body.startswith("**", index):
            parts.append(".*")
            index += 2
        elif body[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif body[index] == "?":
            parts.append("[^/]")
            index += 1
        else:
            parts.append(re.escape(body[index]))
            index += 1
    start = "" if anchored else "(?:.*/)?"
    end = "/.*" if directory else "(?:/.*)?"
    return re.compile(start + "".join(parts) + end + r"\Z")


def parse_code_owners(text: str, source: str = "") -> CodeOwners:
    """The rules of a CODEOWNERS text; malformed lines (no pattern) are skipped."""
    rules = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or line.startswith("["):
            continue
        pattern, *owners = line.split()
        rules.append(OwnerRule(pattern, tuple(owners), _translate(pattern)))
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


def probe_path(pattern: str) -> str:
    """A path a glob such as `platform/**` or `teams/*/quotas.yaml` matches, to ask
    CODEOWNERS who owns what the glob covers."""
    text = re.sub(r"\[[^\]]*\]", "_", pattern.removeprefix("./").lstrip("/"))
    text = text.replace("**", "_").replace("*", "_").replace("?", "_")
    return text.rstrip("/") + ("/_" if text.endswith("/") else "")
