"""slurm.conf syntax as Slurm's own parser reads it, for the partitions file trainform edits.

Pure, no I/O. Used by providers/slurm/partitions.py to read the managed file and to edit
one entry in place. The rules follow src/common/parse_config.c (`_get_next_line`,
`_strip_comments`, `_strip_continuation`, `_strip_escapes`, `_keyvalue_regex`):

- an entry is one physical line, or several: a line whose text (comment removed) ends in
  an odd number of backslashes continues on the next one; the last backslash and the line
  break go, nothing else (`A=1 \\` + `B=2` reads `A=1 B=2`, `A=1\\` + `B=2` reads `A=1B=2`);
- `#` starts a comment to the end of its physical line unless an odd number of
  backslashes escapes it (`\\#` is a literal `#`); a comment never continues;
- after joining, a backslash escapes the character after it (`\\\\` is one backslash);
- a setting is `Key=Value`, with optional blanks around `=` and a value that is either a
  run of non-blank characters or `"quoted text"`; keys compare without case; a later
  setting of the same key wins; text that is not a setting is an error to Slurm;
- `PartitionName=DEFAULT` sets defaults for the partition lines after it.

Marker for lines trainform must leave alone: a comment line `# trainform: ignore` in the
comment lines directly above a partition's line (no blank line between) keeps that
partition out of import, adoption and every write (docs/slurm.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SETTING = re.compile(r'\s*([A-Za-z0-9_.]+)\s*[-*+/]?=\s*(?:"([^"]*)"|(\S+))(?=\s|$)')
IGNORE = re.compile(r"^\s*#\s*trainform\s*:\s*ignore\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Setting:
    """One `Key=Value` of an entry: the value as Slurm reads it, and where its text is
    (physical line of the entry, start and end column), when it lies on one line."""

    key: str
    value: str
    line: int
    start: int
    end: int


@dataclass
class Entry:
    """One entry (a physical line and the lines it continues on), parsed."""

    lines: list[str]
    settings: list[Setting] = field(default_factory=list)
    leftover: str = ""
    """Text Slurm cannot read as a setting (a parse error to Slurm), "" when none."""
    joined: str = ""

    def values(self, canonical: dict[str, str] | None = None) -> dict[str, str]:
        """Key -> value (a later setting of a key wins), keys spelled as `canonical` maps
        their lowercase, else as written."""
        found: dict[str, str] = {}
        for setting in self.settings:
            key = (canonical or {}).get(setting.key.lower(), setting.key)
            found.pop(key, None)
            found[key] = setting.value
        return found

    @property
    def first_key(self) -> str:
        return self.settings[0].key.lower() if self.settings else ""


def comment_start(line: str) -> int:
    """Index of the `#` that starts the line's comment (not escaped), else len(line)."""
    backslashes = 0
    for index, char in enumerate(line):
        if char == "#" and backslashes % 2 == 0:
            return index
        backslashes = backslashes + 1 if char == "\\" else 0
    return len(line)


def continues(line: str) -> bool:
    """Whether Slurm joins the next physical line to this one."""
    text = line[: comment_start(line)].rstrip()
    trailing = len(text) - len(text.rstrip("\\"))
    return trailing % 2 == 1


def group_lines(lines: list[str]) -> list[list[str]]:
    """Physical lines grouped into entries (a continued line with the lines it joins)."""
    groups: list[list[str]] = []
    current: list[str] = []
    for line in lines:
        current.append(line)
        if not continues(line):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def parse_entry(text: str) -> Entry:
    """An entry's text (physical lines joined by newlines) as Slurm reads it."""
    lines = text.split("\n")
    entry = Entry(lines)
    characters: list[tuple[str, int, int]] = []  # (char, physical line, column)
    for number, line in enumerate(lines):
        active = line[: comment_start(line)]
        stripped = active.rstrip()
        if continues(line):
            active = stripped[:-1]  # the continuing backslash goes, the blanks before stay
        characters += [(char, number, column) for column, char in enumerate(active)]
    unescaped: list[tuple[str, int, int]] = []
    index = 0
    while index < len(characters):
        if characters[index][0] == "\\" and index + 1 < len(characters):
            index += 1
        unescaped.append(characters[index])
        index += 1
    joined = "".join(char for char, _, _ in unescaped)
    entry.joined = joined
    position = 0
    while True:
        match = SETTING.match(joined, position)
        if match is None:
            break
        value = match.group(2) if match.group(2) is not None else match.group(3)
        first = unescaped[match.start(1)]
        last = unescaped[match.end() - 1]
        if first[1] == last[1]:
            setting = Setting(match.group(1), value, first[1], first[2], last[2] + 1)
        else:  # split by a continuation: readable, not editable in place
            setting = Setting(match.group(1), value, -1, -1, -1)
        entry.settings.append(setting)
        position = match.end()
    entry.leftover = joined[position:].strip()
    return entry


def is_ignore_marker(line: str) -> bool:
    return bool(IGNORE.match(line))


def render_value(value: str) -> str:
    """A value as slurm.conf must spell it to read back the same (escaped `#`, `\\`)."""
    return value.replace("\\", "\\\\").replace("#", "\\#")


def edit_entry(text: str, changes: dict[str, str | None], canonical: dict[str, str]) -> str:
    """The entry with the settings of `changes` given their new value in place (every
    setting of that key, in its own spelling of the key), or removed (None); settings it
    lacks added after the last setting of its last physical line, before any comment.
    Every other character stays as it was."""
    entry = parse_entry(text)
    lines = list(entry.lines)
    pending = dict(changes)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for setting in entry.settings:
        key = canonical.get(setting.key.lower(), setting.key)
        if key not in changes:
            continue
        if setting.line < 0:
            raise ValueError(
                f"setting {setting.key} is split across a continued line; join it by hand"
            )
        pending.pop(key, None)
        value = changes[key]
        replacement = "" if value is None else f"{setting.key}={render_value(value)}"
        edits.setdefault(setting.line, []).append((setting.start, setting.end, replacement))
    for number, spans in edits.items():
        line = lines[number]
        for start, end, replacement in sorted(spans, reverse=True):
            if replacement:
                line = line[:start] + replacement + line[end:]
            else:  # the setting and the blanks before it go
                head = line[:start].rstrip(" \t")
                line = head + line[end:] if head else line[:start] + line[end:].lstrip(" \t")
        lines[number] = line
    added = [f"{key}={render_value(value)}" for key, value in pending.items() if value is not None]
    if added:
        lines[-1] = _append(lines, entry, " ".join(added))
    return "\n".join(lines)


def _append(lines: list[str], entry: Entry, addition: str) -> str:
    """The last physical line with `addition` after the text Slurm reads on it."""
    last = lines[-1]
    at = len(last[: comment_start(last)].rstrip())
    if continues(last):  # the file ends in a continuation: add before its backslash
        at -= 1
    if at <= 0:  # nothing read on it yet: after its indentation
        at = len(last) - len(last.lstrip(" \t"))
    before = "\n".join([*lines[:-1], last[:at]])
    reads_before = parse_entry(before).joined if before else ""
    glue = " " if reads_before and not reads_before[-1].isspace() else ""
    rest = last[at:]
    if rest and not rest[0].isspace():
        rest = " " + rest
    return last[:at] + glue + addition + rest


def with_defaults(entries: Iterable[dict[str, str]]) -> dict[str, dict[str, str]]:
    """Partition name (lowercase) -> its settings as Slurm applies them: each
    `PartitionName=DEFAULT` line's settings under the lines after it."""
    defaults: dict[str, str] = {}
    found: dict[str, dict[str, str]] = {}
    for values in entries:
        name = values.get("PartitionName", "")
        if name.upper() == "DEFAULT":
            defaults.update({k: v for k, v in values.items() if k != "PartitionName"})
        elif name:
            found[name.lower()] = {**defaults, **values}
    return found
