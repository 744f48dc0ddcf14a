"""The one slurm.conf include file trainform owns: partitions, and pool records.

Partitions live in slurm.conf (runtime-created ones vanish on reconfigure), so the
provider owns one included file (connection `partitions_file`) and never edits anything
else. The file opens with a header comment; each owned block is a marker line
`# trainform:<manager>:<address>` followed by one line: a `PartitionName=...` line for a
Queue, a `# pool Nodes=... Features=...` record for a ResourcePool, or a
`# quota Account=... Partition=...` record for a Quota (Slurm has no pool object, and
associations carry no description: the records are what make them owned). Lines outside
marked blocks are kept as they are.

Writing (`PartitionFile.change`), under an exclusive lock on `<file>.lock`:
1. render the new text; check semantics (every partition's nodes exist, every QOS exists)
   and syntax (Slurm parses a temporary copy of slurm.conf that includes the new text, with
   SLURM_CONF pointed at it);
2. keep the current file as `<file>.last-good`, write the new one atomically;
3. `scontrol reconfigure`, then `scontrol ping`; if the controller does not answer, the
   last good file is restored and reconfigured, and the write fails. A bad partition spec
   never takes the controller down.
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
from pathlib import Path

from providers.errors import PermanentProviderError, ProviderConfigError
from providers.slurm.commands import SlurmCommands
from providers.slurm.names import parse_marker

HEADER = (
    "# Partitions managed by trainform: do not edit. Each block below a trainform marker is\n"
    "# rewritten on apply; lines outside marked blocks are left alone.\n"
)
POOL_RECORD = "# pool "
QUOTA_RECORD = "# quota "
PARTITION_KEYS = (
    "PartitionName",
    "Nodes",
    "PriorityTier",
    "MaxTime",
    "DefaultTime",
    "DefMemPerGPU",
    "DefMemPerCPU",
    "QOS",
    "AllowAccounts",
    "State",
    "OverSubscribe",
    "PreemptMode",
)
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
    blocks: list[Block] = field(default_factory=list)
    others: list[str] = field(default_factory=list)

    def find(self, address: str) -> Block | None:
        return next((b for b in self.blocks if b.address.lower() == address.lower()), None)

    def put(self, block: Block) -> None:
        for index, existing in enumerate(self.blocks):
            if existing.address.lower() == block.address.lower():
                self.blocks[index] = block
                return
        self.blocks.append(block)

    def remove(self, address: str) -> None:
        self.blocks = [b for b in self.blocks if b.address.lower() != address.lower()]

    def partitions(self) -> dict[str, dict[str, str]]:
        """Every PartitionName line in the file (owned or not), by lowercased name."""
        found = {}
        for line in [b.line for b in self.blocks if not b.is_record] + self.others:
            settings = parse_settings(line)
            if "PartitionName" in settings:
                found[settings["PartitionName"].lower()] = settings
        return found


def parse_settings(line: str) -> dict[str, str]:
    """`Key=Value Key=Value` -> dict, keys in Slurm's canonical spelling where known."""
    canonical = {key.lower(): key for key in PARTITION_KEYS}
    settings = {}
    for token in line.split():
        key, separator, value = token.partition("=")
        if separator:
            settings[canonical.get(key.lower(), key)] = value
    return settings


def render_settings(settings: dict[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in settings.items() if value != "")


def parse_file(text: str) -> ManagedFile:
    managed = ManagedFile()
    owner: tuple[str, str] | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("#") and owner is None:
            found = parse_marker(line.lstrip("#").strip())
            if found is not None:
                owner = found
                continue
        if owner is not None and line.strip():
            managed.blocks.append(Block(owner[0], owner[1], line.strip()))
            owner = None
            continue
        if line.strip() and line not in HEADER.splitlines():
            managed.others.append(line)
    return managed


def render_file(managed: ManagedFile) -> str:
    parts = [HEADER]
    for block in sorted(managed.blocks, key=lambda b: (not b.is_record, b.address)):
        parts.append(f"# trainform:{block.manager}:{block.address}\n{block.line}\n")
    if managed.others:
        parts.append("\n".join(managed.others) + "\n")
    return "".join(parts)


def syntax_problems(managed: ManagedFile) -> list[str]:
    """What Slurm's parser would refuse in a managed partition line, found without Slurm."""
    problems = []
    for block in managed.blocks:
        if block.is_record:
            continue
        tokens = block.line.split()
        for token in tokens:
            key, separator, value = token.partition("=")
            if not separator or not value:
                problems.append(f"{block.address}: {token!r} is not Key=Value")
            elif key not in PARTITION_KEYS:
                problems.append(f"{block.address}: unknown partition setting {key}")
    return problems


class PartitionFile:
    def __init__(self, path: Path, slurm_conf: Path, commands: SlurmCommands) -> None:
        self.path = path
        self.slurm_conf = slurm_conf
        self.commands = commands

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
            _atomic_write(self.path, HEADER)
        self._reconfigure_ok()
        raise PermanentProviderError(
            f"cannot apply partitions in {self.path}: the controller refused the file or did "
            "not answer after `scontrol reconfigure`; the last good file was restored"
        )

    def _reconfigure_ok(self) -> bool:
        result = self.commands.run(["scontrol", "reconfigure"], check=False)
        # a refused file leaves the controller running on the old one: still a failure
        refused = result.returncode != 0 and "unable to contact" not in result.text.lower()
        return self.ping() and not refused

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
