"""Path globs as CODEOWNERS reads them: the one matcher of CODEOWNERS lines, `adminPaths`
and a Project's `specPaths`, so tenancy, review and the code host can never disagree about
what a pattern covers.

Who calls it: policies.codeowners (each CODEOWNERS line), policies.builtin.isolation
(admin paths, team folders), policies.review.approvers (who approves a changed file) and
policies.owner_agreement (sample paths to compare the two). The rules are GitHub's for
CODEOWNERS (gitignore's, with its exceptions), on `/`-separated paths relative to the spec
folder:

- `*` matches any run of characters within one path segment (never a `/`); `?` one
  character other than `/`; a segment that is exactly `**` matches any number of whole
  segments (`a/**/b`: a/b, a/x/b, a/x/y/b; a leading `**/` any folder, zero included; a
  trailing `/**` everything below, not the folder itself).
- A pattern with a `/` at its start or in its middle is anchored at the root
  (`teams/*/quotas.yaml` is `/teams/*/quotas.yaml`); one without (`quotas.yaml`,
  `apps/`) matches at any depth, as if it started with `**/`.
- A trailing `/` matches only what lies below a folder the rest matches.
- Otherwise a pattern matches a path and everything below it (a pattern naming a folder
  covers its files), except that one ending in a lone `*` segment (`docs/*`) matches the
  folder's direct entries only, as GitHub documents.
- No character ranges (`[`, `]`), no negation (`!`), no escapes (`\\`): like GitHub, those
  characters are literal. Matching is case-sensitive. A leading `./` of a pattern or a
  path is dropped, and so is a path's leading `/`. An empty pattern (or `/`) matches
  nothing.

Invariant: a path `sample_paths(pattern)` returns is matched by `compile_glob(pattern)`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

GLOBSTAR = "**"
FILLER = "_"
"""The segment sample paths put where a pattern has a wildcard."""

_SEGMENT_WILD = re.compile(r"[*?]")


def normalize_path(path: str) -> str:
    """`path` as globs see it: `/`-separated, no leading `./` or `/`."""
    text = path
    while text.startswith("./"):
        text = text[2:]
    return text.lstrip("/")


def _clean(pattern: str) -> str:
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    return text


def is_anchored(pattern: str) -> bool:
    """Whether `pattern` is anchored at the root: a `/` at its start or in its middle."""
    text = _clean(pattern)
    return text.startswith("/") or "/" in text.rstrip("/")


def _segments(pattern: str) -> tuple[list[str], bool]:
    """The segments a pattern matches, in order (an unanchored pattern starts with `**`),
    and whether it ends with `/` (only what lies below matches)."""
    text = _clean(pattern)
    directory = text.endswith("/")
    segments = text.strip("/").split("/")
    if not is_anchored(text) and segments != [GLOBSTAR]:
        segments = [GLOBSTAR, *segments]
    collapsed: list[str] = []
    for segment in segments:
        if not (segment == GLOBSTAR and collapsed and collapsed[-1] == GLOBSTAR):
            collapsed.append(segment)
    return collapsed, directory


def _segment_regex(segment: str) -> str:
    if segment == "*":
        return "[^/]+"
    return "".join(
        "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char) for char in segment
    )


def _regex(pattern: str) -> str:
    text = _clean(pattern)
    if text.strip("/") == "":
        return "(?!)"
    segments, directory = _segments(text)
    last = len(segments) - 1
    parts: list[str] = []
    separator = False
    for index, segment in enumerate(segments):
        if segment == GLOBSTAR:
            if index == 0 and index == last:
                parts.append("[^/]+(?:/[^/]+)*")
            elif index == 0:
                parts.append("(?:[^/]+/)*")
            elif index == last:
                parts.append("(?:/[^/]+)+")
            else:
                parts.append("(?:/[^/]+)*")
            separator = index != 0 or index == last
            continue
        parts.append(("/" if separator else "") + _segment_regex(segment))
        separator = True
    if directory:
        parts.append("(?:/[^/]+)+")
    elif segments[last] not in ("*", GLOBSTAR):
        parts.append("(?:/.*)?")
    return "".join(parts)


@dataclass(frozen=True)
class PathGlob:
    """One pattern, compiled; `matches` takes a path relative to the spec folder."""

    pattern: str
    regex: re.Pattern[str]

    def matches(self, path: str) -> bool:
        return self.regex.fullmatch(normalize_path(path)) is not None


@lru_cache(maxsize=4096)
def compile_glob(pattern: str) -> PathGlob:
    """`pattern` compiled by the rules of the module docstring."""
    return PathGlob(pattern, re.compile(_regex(pattern), re.DOTALL))


class GlobSet:
    """Several patterns matched as one (a path matches when any pattern does)."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(str(p) for p in patterns)
        self.globs = tuple(compile_glob(p) for p in self.patterns)
        joined = "|".join(f"(?:{glob.regex.pattern})" for glob in self.globs)
        self.regex = re.compile(joined or "(?!)", re.DOTALL)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def matches(self, path: str) -> bool:
        return self.regex.fullmatch(normalize_path(path)) is not None

    def first_match(self, path: str) -> str | None:
        """The first pattern that matches `path`, if any."""
        return next((glob.pattern for glob in self.globs if glob.matches(path)), None)


def _expansions(segment: str, index: int, last: int, fillers: Sequence[str]) -> list[list[str]]:
    """What a segment may become in a sample path: itself with `_` for its wildcards, a
    filler for a lone `*`, none, one or two segments for `**`."""
    if segment == GLOBSTAR:
        found = [[filler] for filler in fillers] + [[filler, FILLER] for filler in fillers]
        return found if index == last else [[], *found]
    if segment == "*":
        return [[filler] for filler in fillers if "/" not in filler]
    return [[_SEGMENT_WILD.sub(FILLER, segment) or FILLER]]


def sample_paths(pattern: str, fillers: Iterable[str] = ()) -> list[str]:
    """Paths `pattern` matches, to ask CODEOWNERS about what it covers: the plainest one
    first (`platform/**` -> `platform/_`, `teams/*/quotas.yaml` -> `teams/_/quotas.yaml`),
    then each wildcard in turn filled with each of `fillers` (folder names such as
    `alignment`, or for `**` also paths such as `teams/alignment`), with zero and two
    segments for `**`. Linear in wildcards x fillers; every path returned matches."""
    text = _clean(pattern)
    if text.strip("/") == "":
        return []
    segments, directory = _segments(text)
    last = len(segments) - 1
    choices = [FILLER, *(f for f in dict.fromkeys(fillers) if f and f != FILLER)]
    options = [_expansions(s, i, last, choices) for i, s in enumerate(segments)]
    # The plainest: no folder for a leading `**`, one `_` for any other wildcard.
    plain = [opts[1] if segments[i] == GLOBSTAR and 0 < i < last else opts[0]
             for i, opts in enumerate(options)]  # fmt: skip
    variants = [plain]
    for index, opts in enumerate(options):
        for option in opts:
            if option != plain[index]:
                variants.append([*plain[:index], option, *plain[index + 1 :]])
    glob = compile_glob(pattern)
    found: list[str] = []
    for variant in variants:
        path = "/".join(part for option in variant for part in option)
        if directory:
            path = f"{path}/{FILLER}" if path else FILLER
        if path and path not in found and glob.matches(path):
            found.append(path)
    return found


def probe_path(pattern: str) -> str:
    """The plainest path `pattern` matches (`platform/**` -> `platform/_`): what CODEOWNERS
    is asked about to name the owners of what the pattern covers."""
    samples = sample_paths(pattern)
    return samples[0] if samples else FILLER


def literal_prefixes(pattern: str) -> list[str]:
    """The folders a pattern names before its first wildcard (`/teams/alignment/**` ->
    `teams`, `teams/alignment`): fillers for sample paths of other patterns."""
    segments = _clean(pattern).strip("/").split("/")
    literal: list[str] = []
    for segment in segments[:-1] if not _clean(pattern).endswith("/") else segments:
        if not segment or _SEGMENT_WILD.search(segment):
            break
        literal.append(segment)
    return ["/".join(literal[: n + 1]) for n in range(len(literal))]
