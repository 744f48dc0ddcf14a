"""The one slurm.conf include file trainform owns: partitions, and pool records.

Partitions live in slurm.conf (runtime-created ones vanish on reconfigure), so the
provider owns one included file (connection `partitions_file`) and never edits anything
else. A block trainform created is a marker line `# trainform:<manager>:<address>`
followed by one line: a `PartitionName=...` line for a Queue, a `# pool Nodes=...
Features=...` record for a ResourcePool, or a `# quota Account=... Partition=...` record
for a Quota. A partition written by hand and adopted by `trainform import` keeps its line
unmarked (import never writes; state records the adoption).

The file is read as Slurm's parser reads it (providers/slurm/conf_syntax.py: comments,
`\\` continuations, escapes, keys without case, `PartitionName=DEFAULT`) and kept entry by
entry: an edit replaces the values of the settings it changes where they stand (on
whichever continued line), adds new ones after the last setting before any comment, and
leaves every other byte as it was (settings trainform does not manage, comments, blank
lines, order). A partition name appears on one line only: `put` replaces the line that
names it, and a file that already names a partition twice is refused before anything is
written. A partition whose line has `# trainform: ignore` in the comment lines directly
above it is invisible to import and never written.

Writing (`PartitionFile.change`), under an exclusive lock on `<file>.lock`:
1. render the new text; check semantics (every partition's nodes exist, every QOS exists)
   and syntax (Slurm parses a temporary copy of slurm.conf that includes the new text, with
   SLURM_CONF pointed at it);
2. keep the current file as `<file>.last-good`, write the new one atomically;
3. `scontrol reconfigure`, then `scontrol ping`. If slurmctld refuses the file or stops
   answering, the last good file is put back, `scontrol reconfigure` runs again and
   `scontrol ping` checks the controller answers; the error says whether it does, and if
   not, how to bring it back.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from trainform.providers.errors import PermanentProviderError, ProviderConfigError
from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.conf_syntax import (
    edit_entry,
    group_lines,
    is_ignore_marker,
    parse_entry,
    render_value,
    with_defaults,
)
from trainform.providers.slurm.names import parse_marker
from trainform.specs.models.slurm import PARTITION_KEPT_KEYS
from trainform.specs.models.slurm import PARTITION_KEYS as MANAGED_KEYS

HEADER = (
    "# Partitions managed by trainform: do not edit. Each block below a trainform marker is\n"
    "# rewritten on apply; lines outside marked blocks are left alone.\n"
)
POOL_RECORD = "# pool "
QUOTA_RECORD = "# quota "
PARTITION_KEYS = ("PartitionName", "Nodes", *MANAGED_KEYS, *PARTITION_KEPT_KEYS)
CANONICAL = {key.lower(): key for key in PARTITION_KEYS}
INCLUDE = re.compile(r"^\s*include\s+(\S+)\s*$", re.IGNORECASE)


@dataclass
class Block:
    manager: str
    address: str
    line: str

    @property
    def is_pool(self) -> bool:
        return self.line.startswith(POOL_RECORD)

    @property
    def is_record(self) -> bool:
        """A comment record (pool or quota), not a line Slurm reads."""
        return self.line.startswith("#")

    @property
    def settings(self) -> dict[str, str]:
        text = self.line.split(" ", 2)[2] if self.is_record else self.line
        return parse_settings(text)


@dataclass
class ManagedFile:
    """The file as an ordered list of marked blocks and raw entries (kept byte for byte;
    an entry continued with `\\` holds its physical lines joined by newlines)."""

    items: list[Block | str] = field(default_factory=list)
    new: bool = True
    trailing_newline: bool = True

    @property
    def blocks(self) -> list[Block]:
        return [item for item in self.items if isinstance(item, Block)]

    @blocks.setter
    def blocks(self, kept: list[Block]) -> None:
        ids = {id(block) for block in kept}
        self.items = [i for i in self.items if not isinstance(i, Block) or id(i) in ids]
        self.items += [b for b in kept if not any(b is i for i in self.items)]

    @property
    def others(self) -> list[str]:
        """Lines outside marked blocks that Slurm reads (not comments, not blank)."""
        return [
            item
            for item in self.items
            if isinstance(item, str) and item.strip() and not item.lstrip().startswith("#")
        ]

    def append_line(self, line: str) -> None:
        self.items.append(line)

    def find(self, address: str) -> Block | None:
        return next((b for b in self.blocks if b.address.lower() == address.lower()), None)

    def ignored(self) -> set[str]:
        """Partitions (lowercase) marked `# trainform: ignore` in the comment lines
        directly above their line: never imported, adopted or written."""
        found, marked = set(), False
        for item in self.items:
            text = item if isinstance(item, str) else ""
            if text.lstrip().startswith("#"):
                marked = marked or is_ignore_marker(text)
                continue
            name = _partition_name(item)
            if marked and name:
                found.add(name)
            marked = False
        return found

    def refuse_ignored(self, name: str) -> None:
        if name.lower() in self.ignored():
            raise PermanentProviderError(
                f"cannot write partition {name}: its line is marked `# trainform: ignore`, "
                "so trainform leaves it alone (remove the marker to manage it)"
            )

    def put(self, block: Block) -> None:
        """Replace the block of the address, or the line naming the same partition; else
        append. One partition, one line; a partition marked to be ignored is refused."""
        name = parse_settings(block.line).get("PartitionName", "").lower()
        if name:
            self.refuse_ignored(name)
        for index, item in enumerate(self.items):
            if isinstance(item, Block) and item.address.lower() == block.address.lower():
                self.items[index] = block
                return
        for index, item in enumerate(self.items):
            if name and _partition_name(item) == name:
                self.items[index] = block
                return
        self.items.append(block)

    def remove(self, address: str) -> None:
        self.items = [
            i
            for i in self.items
            if not (isinstance(i, Block) and i.address.lower() == address.lower())
        ]

    def remove_partition(self, name: str) -> None:
        if name.lower() in self.ignored():
            return
        self.items = [i for i in self.items if _partition_name(i) != name.lower()]

    def partition_line(self, name: str) -> str | None:
        """The line of partition `name` (None when absent or marked to be ignored)."""
        if name.lower() in self.ignored():
            return None
        for item in self.items:
            if _partition_name(item) == name.lower():
                return item.line if isinstance(item, Block) else item
        return None

    def set_partition_line(self, name: str, line: str) -> None:
        """Put `line` where the partition's line is (marked or not)."""
        self.refuse_ignored(name)
        for index, item in enumerate(self.items):
            if _partition_name(item) == name.lower():
                self.items[index] = (
                    Block(item.manager, item.address, line) if isinstance(item, Block) else line
                )
                return
        raise PermanentProviderError(f"cannot change partition {name}: no line names it")

    def partitions(self) -> dict[str, dict[str, str]]:
        """Every partition line in the file (owned or not, not marked to be ignored), by
        lowercased name, with the `PartitionName=DEFAULT` settings above it put in."""
        entries = [
            parse_settings(item.line if isinstance(item, Block) else item)
            for item in self.items
            if _partition_name(item) or _is_defaults(item)
        ]
        ignored = self.ignored()
        return {k: v for k, v in with_defaults(entries).items() if k not in ignored}

    def partition_settings(self, name: str) -> dict[str, str]:
        """The settings Slurm applies to partition `name` ({} when absent or ignored)."""
        return self.partitions().get(name.lower(), {})

    def duplicates(self) -> list[str]:
        names = [n for n in (_partition_name(i) for i in self.items) if n]
        return sorted({n for n in names if names.count(n) > 1})


def _text(item: Block | str) -> str:
    return item.line if isinstance(item, Block) else item


def _partition_name(item: Block | str) -> str:
    """The partition an entry defines (lowercase), "" for anything else (comments,
    records, `PartitionName=DEFAULT`)."""
    name = _defined(_text(item))
    return "" if name.upper() == "DEFAULT" else name.lower()


def _is_defaults(item: Block | str) -> bool:
    return _defined(_text(item)).upper() == "DEFAULT"


@lru_cache(maxsize=8192)
def _defined(line: str) -> str:
    """The PartitionName an entry starts with, as written ("" for anything else)."""
    if line.lstrip().startswith("#"):
        return ""
    entry = parse_entry(line)
    return entry.settings[0].value if entry.first_key == "partitionname" else ""


@lru_cache(maxsize=8192)
def _settings(line: str) -> tuple[tuple[str, str], ...]:
    return tuple(parse_entry(line).values(CANONICAL).items())


def parse_settings(line: str) -> dict[str, str]:
    """A slurm.conf entry's settings as Slurm reads them (comments, continuations and
    escapes as parse_config.c treats them), keys in Slurm's canonical spelling where
    known, a later setting of a key winning. Parsed once per distinct text: the file is
    read for every queue a plan observes."""
    return dict(_settings(line))


def render_settings(settings: dict[str, str]) -> str:
    return " ".join(
        f"{key}={render_value(value)}" for key, value in settings.items() if value != ""
    )


def pool_record(spec: dict[str, Any]) -> str:
    """A ResourcePool's record line: the hostlist and features of its spec."""
    features = ",".join(spec.get("features", []))
    return POOL_RECORD + render_settings({"Nodes": spec.get("nodeList", ""), "Features": features})


def edit_line(line: str, changes: dict[str, str | None]) -> str:
    """`line` (an entry, continued or not) with the values of `changes` put in place (None
    removes the setting); new settings go after the last setting of its last physical
    line, before its comment; every other character stays."""
    try:
        return edit_entry(line, changes, CANONICAL)
    except ValueError as exc:
        raise PermanentProviderError(f"cannot edit the partition line: {exc}") from None


def parse_file(text: str) -> ManagedFile:
    managed = ManagedFile(new=not text, trailing_newline=not text or text.endswith("\n"))
    owner: tuple[str, str] | None = None
    raws = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    for group in group_lines([] if not text else raws):
        raw = "\n".join(group)
        if raw.startswith("#") and owner is None:
            found = parse_marker(raw.lstrip("#").strip())
            if found is not None:
                owner = found
                continue
        if owner is not None and raw.strip():
            managed.items.append(Block(owner[0], owner[1], raw.strip()))
            owner = None
            continue
        managed.items.append(raw)
    return managed


def render_file(managed: ManagedFile) -> str:
    lines: list[str] = HEADER.splitlines() if managed.new and managed.items else []
    for item in managed.items:
        if isinstance(item, Block):
            lines += [f"# trainform:{item.manager}:{item.address}", item.line]
        else:
            lines.append(item)
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if managed.trailing_newline else "")


def syntax_problems(managed: ManagedFile) -> list[str]:
    """What Slurm's parser would refuse in a line trainform wrote, found without Slurm
    (lines written by hand are Slurm's to judge: they are kept as they are)."""
    problems = [
        f"partition {name} is defined on more than one line" for name in managed.duplicates()
    ]
    for block in managed.blocks:
        if block.is_record:
            continue
        entry = parse_entry(block.line)
        if entry.leftover:
            problems.append(f"{block.address}: {entry.leftover!r} is not Key=Value")
        for setting in entry.settings:
            if setting.key.lower() not in CANONICAL:
                problems.append(f"{block.address}: unknown partition setting {setting.key}")
    return problems


class PartitionFile:
    def __init__(self, path: Path, slurm_conf: Path, commands: SlurmCommands) -> None:
        self.path = path
        self.slurm_conf = slurm_conf
        self.commands = commands
        self.recovery_wait = 15.0

    @property
    def last_good(self) -> Path:
        return self.path.with_name(self.path.name + ".last-good")

    def read(self) -> ManagedFile:
        try:
            return parse_file(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return ManagedFile()
        except OSError as exc:
            raise ProviderConfigError(f"cannot read {self.path}: {exc}") from None

    @contextmanager
    def locked(self) -> Iterator[None]:
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            handle = open(lock_path, "a+")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise ProviderConfigError(f"cannot lock {self.path}: {exc}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()

    def change(
        self, edit: Callable[[ManagedFile], None], check: Callable[[ManagedFile], list[str]]
    ) -> None:
        """Read, edit, check and write the file under the lock (see the module docstring)."""
        with self.locked():
            before = self.read()
            after = self.read()
            edit(after)
            if render_file(after) == render_file(before) and self.path.exists():
                return
            if not before.new and before.duplicates():
                raise PermanentProviderError(
                    f"cannot write partitions to {self.path}: it names partition "
                    f"{', '.join(before.duplicates())} on more than one line; fix the file first"
                )
            problems = syntax_problems(after) + check(after)
            if problems:
                raise PermanentProviderError(
                    f"cannot write partitions to {self.path}: " + "; ".join(problems)
                )
            text = render_file(after)
            self._slurm_parses(text)
            active = _active_lines(render_file(before)) != _active_lines(text)
            self._install(text, reconfigure=active)

    def _included(self) -> bool:
        try:
            lines = self.slurm_conf.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ProviderConfigError(f"cannot read {self.slurm_conf}: {exc}") from None
        target = self.path.resolve()
        for line in lines:
            match = INCLUDE.match(line)
            if match and Path(match.group(1)).resolve() == target:
                return True
        return False

    def _slurm_parses(self, text: str) -> None:
        """Slurm's own parser on a temporary slurm.conf that includes the new text."""
        if not self._included():
            raise ProviderConfigError(
                f"cannot manage partitions: {self.slurm_conf} has no `Include {self.path}` line"
            )
        with tempfile.TemporaryDirectory(prefix="trainform-slurm-") as folder:
            candidate = Path(folder) / self.path.name
            candidate.write_text(text, encoding="utf-8")
            conf_lines = []
            for line in self.slurm_conf.read_text(encoding="utf-8").splitlines():
                match = INCLUDE.match(line)
                if match and Path(match.group(1)).resolve() == self.path.resolve():
                    line = f"Include {candidate}"
                elif match and not Path(match.group(1)).is_absolute():
                    line = f"Include {self.slurm_conf.parent / match.group(1)}"
                conf_lines.append(line)
            temporary_conf = Path(folder) / "slurm.conf"
            temporary_conf.write_text("\n".join(conf_lines) + "\n", encoding="utf-8")
            for name in ("gres.conf", "cgroup.conf", "topology.conf"):
                if (self.slurm_conf.parent / name).exists():
                    shutil.copy(self.slurm_conf.parent / name, Path(folder) / name)
            result = self.commands.run(
                ["scontrol", "show", "hostnames", "localhost"],
                conf=str(temporary_conf),
                check=False,
                retry=False,
            )
            if result.returncode != 0:
                raise PermanentProviderError(
                    f"cannot write partitions to {self.path}: Slurm refuses the configuration: "
                    f"{result.text}"
                )

    def _install(self, text: str, reconfigure: bool) -> None:
        if self.path.exists():
            shutil.copy2(self.path, self.last_good)
        _atomic_write(self.path, text)
        if not reconfigure:
            return
        if self._reconfigure_ok():
            return
        if self.last_good.exists():
            shutil.copy2(self.last_good, self.path)
        else:
            _atomic_write(self.path, "")
        self.commands.run(["scontrol", "reconfigure"], check=False, retry=False)
        if self.ping(self.recovery_wait):
            raise PermanentProviderError(
                f"cannot apply partitions in {self.path}: slurmctld refused the new file; "
                "the last good file is back in place, reconfigured, and the controller answers"
            )
        raise PermanentProviderError(
            f"cannot apply partitions in {self.path}: slurmctld refused the new file and does "
            f"not answer `scontrol ping`, even after the last good file was put back "
            f"({self.last_good} -> {self.path}) and `scontrol reconfigure` ran. The controller "
            "is down: start slurmctld again on that file (e.g. `systemctl start slurmctld`), "
            "check `scontrol ping`, then run `trainform plan`"
        )

    def _reconfigure_ok(self) -> bool:
        result = self.commands.run(["scontrol", "reconfigure"], check=False, retry=False)
        # a refused file leaves the controller running on the old one: still a failure
        if result.returncode != 0:
            return False
        return self.ping()

    def ping(self, timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            result = self.commands.run(["scontrol", "ping"], check=False, retry=False)
            if result.returncode == 0 and "is UP" in result.stdout:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)


def _active_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _atomic_write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
