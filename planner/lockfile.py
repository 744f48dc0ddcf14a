"""`trainform.lock`: what names resolved to, so that what runs is exactly what Git says.

The lock records, per spec folder: each Image's content digest, each Dataset version's
manifest digest, and each code location's identity: the pinned commit of an external
repository, or the content digest of a code folder in the spec repository (the files a
run's snapshot copies; see `resolve_code`). `trainform lock` writes it; plans use it to
compute run identities; `plan --locked` refuses to run when an entry is missing or no
longer matches what the providers and the code report (a stale lock).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainform.planner.desired import DesiredItem
from trainform.planner.errors import PlannerError
from trainform.planner.session import ProviderSet
from trainform.providers.base import DesiredResource
from trainform.providers.errors import ProviderError
from trainform.providers.local.code_ignore import CODE_IGNORE_FILE, CodeIgnoreError
from trainform.providers.local.layout import code_files
from trainform.specs import RootConfig
from trainform.specs.code_sources import UnsafeCode, check_code, shown

LOCK_FILE = "trainform.lock"
LOCK_FORMAT_VERSION = 1


class LockError(PlannerError):
    """The lock file is missing, unreadable or stale."""


@dataclass
class LockFile:
    images: dict[str, dict[str, Any]] = field(default_factory=dict)
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)
    code: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": LOCK_FORMAT_VERSION,
            "images": dict(sorted(self.images.items())),
            "datasets": dict(sorted(self.datasets.items())),
            "code": dict(sorted(self.code.items())),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, root: Path) -> LockFile | None:
        path = root / LOCK_FILE
        if not path.exists() and not path.is_symlink():
            return None
        if path.is_symlink() or not path.is_file():
            # confined like every other input: a link could read any file of the runner
            raise LockError(
                f"cannot read {path}: it is a link or not a regular file; {LOCK_FILE} must "
                "be a plain file inside the spec folder (run `trainform lock` to write one)"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("formatVersion") != LOCK_FORMAT_VERSION:
                raise ValueError(f"unsupported formatVersion {data.get('formatVersion')!r}")
            return cls(dict(data["images"]), dict(data["datasets"]), dict(data["code"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LockError(f"cannot read {path}: {exc}") from None


def code_key(code: dict[str, Any]) -> str:
    return f"{code['repo']}#{code.get('path') or '.'}"


def resolve_code(
    code: dict[str, Any],
    spec_root: Path,
    code_hosts: Sequence[str] = (),
    exclude: Sequence[Path] = (),
) -> dict[str, Any]:
    """The identity of the code at `code` (a spec's `code:` mapping): what the job runs.

    An external repository is its pinned commit (`commit`, else what `ref` names now, by
    ls-remote). A folder of the spec repository is the content digest of the files a run's
    snapshot copies (`code_digest`; `exclude`: the local roots), never the repository's
    HEAD (nor a `commit` written beside it: the snapshot copies the work tree): a commit
    that changes only other files leaves it as it is, and a clean and a dirty work tree of
    the same content agree.

    The validate rules (specs.code_sources) are checked again first: an unsafe repository
    never reaches git, and only a host in `code_hosts` (security.codeHosts) is contacted."""
    repo = code["repo"]
    try:
        source, folder = check_code(
            repo, code.get("ref"), code.get("path") or "", spec_root, code_hosts
        )
    except UnsafeCode as exc:
        raise LockError(
            f"cannot resolve code {shown(repo)}: spec.code.{exc.field}: {exc}; "
            + (exc.remedy or "`trainform validate` shows where")
        ) from None
    if source.remote and code.get("commit"):
        return {"commit": code["commit"]}
    if source.remote:
        ref = code.get("ref") or "HEAD"
        # `--` ends options: the repository and the ref are positional, whatever they hold.
        result = git_output(["ls-remote", "--quiet", "--", repo, ref], spec_root, remote=True)
        if result is None or not result.split():
            raise LockError(f"cannot resolve {repo} {ref}: git ls-remote found nothing")
        return {"commit": result.split()[0], "ref": ref}
    if folder is None or not folder.is_dir():
        raise LockError(f"cannot resolve code {repo}: {folder} is not a folder")
    try:
        return {"contentDigest": code_digest(folder, exclude)}
    except CodeIgnoreError as exc:
        raise LockError(
            f"cannot resolve code {repo}: {exc}; write the code folder's "
            f"{CODE_IGNORE_FILE} as a plain file of gitignore patterns"
        ) from None
    except OSError as exc:
        raise LockError(
            f"cannot resolve code {repo}: cannot read {folder}: {exc}; make every file of "
            "the code folder readable"
        ) from None


def code_digest(folder: Path, exclude: Sequence[Path] = ()) -> str:
    """The content digest of a code folder: what a run's snapshot of it holds.

    Computed over `code_files` (the selection the local snapshot copies): for each entry,
    sorted by relative POSIX path, the path, its type and its content: a file's sha256,
    or a link's target text. A file is `file` or `executable` (the owner's execute bit:
    the snapshot keeps it and `./train.sh` depends on it; Git records the same bit, so a
    fresh clone agrees, while the other mode bits follow the umask and are left out).
    Nothing else enters: not the folder's absolute path, mtimes, owners, Git's HEAD or
    whether the work tree is clean."""
    encoded = json.dumps(code_entries(folder, exclude), separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(encoded.encode()).hexdigest()


def code_entries(folder: Path, exclude: Sequence[Path] = ()) -> list[list[str]]:
    """[relative path, `file`|`executable`|`link`, sha256 or link target] of each entry of
    the code folder's selection, sorted by path (what `code_digest` hashes)."""
    entries = []
    for relative, path in code_files(folder, tuple(exclude)):
        if path.is_symlink():
            entries.append([relative, "link", os.readlink(path)])
            continue
        content = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                content.update(block)
        kind = "executable" if path.stat().st_mode & stat.S_IXUSR else "file"
        entries.append([relative, kind, content.hexdigest()])
    return entries


def local_roots(config: RootConfig, spec_root: Path) -> tuple[Path, ...]:
    """What a snapshot never copies, so the code identity leaves it out too: the roots of
    the `local` provider instances and the spec folder's lock file (code at `repo: .`
    would otherwise change identity whenever the lock is written)."""
    roots = [spec_root / LOCK_FILE]
    for instance in config.providers:
        if instance.type == "local":
            root = Path(getattr(instance.connection, "root", None) or ".trainform")
            roots.append(root if root.is_absolute() else spec_root / root)
    return tuple(roots)


# Configuration that holds for every git run. git runs in the spec folder (ls-remote) or the
# code folder, where discovery finds the checkout's own `.git` (a pull request cannot add
# one) and so its trusted configuration, credentials included; but a folder of the spec
# tree dressed as a bare repository (HEAD, config, objects/, refs/: committable) is never
# taken for one, so its config cannot name commands. No fsmonitor or hook command runs, and
# no transport but https and ssh (GIT_ALLOW_PROTOCOL too).
_GIT_HARDENING = (
    "-c",
    "safe.bareRepository=explicit",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "protocol.fd.allow=never",
    "-c",
    "protocol.file.allow=never",
)
# Variables that would point git at another repository than the one the folder is in.
_GIT_LOCATION_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)


def git_environment() -> dict[str, str]:
    """This process's environment, made non-interactive and limited to https and ssh."""
    environment = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARIABLES}
    environment.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_ALLOW_PROTOCOL="https:ssh",
        GIT_OPTIONAL_LOCKS="0",
        LC_ALL="C",
    )
    return environment


def git_output(args: list[str], cwd: Path, *, remote: bool = False) -> str | None:
    """stdout of `git <args>` in `cwd` (an argv list, never a shell), None on failure."""
    try:
        result = subprocess.run(
            ["git", *_GIT_HARDENING, *args],
            cwd=cwd,
            env=git_environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60 if remote else 30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


def resolve_pins(
    desired: dict[str, DesiredItem], providers: ProviderSet, spec_root: Path
) -> LockFile:
    """Resolve every image, dataset and code location the specs use, now.

    Images are resolved after the images they depend on, which are passed as resolved pins
    (`outputs_of_dependencies`): a promotion not yet applied resolves to its source's digest,
    since promotion copies the manifest unchanged."""
    lock = LockFile()
    problems = []
    resolved: dict[str, dict[str, Any]] = {}
    code_hosts = providers.config.security.code_hosts
    exclude = local_roots(providers.config, spec_root)
    for item in _dependencies_first(desired):
        try:
            if item.kind in ("Image", "Dataset"):
                resource = DesiredResource(
                    item.address,
                    item.kind,
                    item.name,
                    item.project,
                    item.document,
                    {d: resolved[d] for d in item.dependencies if d in resolved},
                )
                provider = providers.get(item.providers[0])
                pins = provider.resolve(resource)
                resolved[item.address] = pins
                if item.kind == "Image":
                    lock.images[item.address] = {"digest": pins["digest"]}
                else:
                    for version, summary in pins["versions"].items():
                        lock.datasets[f"{item.address}@{version}"] = {
                            "manifestDigest": summary["manifestDigest"]
                        }
            code = (
                item.document["spec"].get("code")
                if item.kind in ("TrainingJob", "EvalSuite")
                else None
            )
            if code:
                lock.code[code_key(code)] = resolve_code(code, spec_root, code_hosts, exclude)
        except (ProviderError, LockError) as exc:
            problems.append(f"{item.address}: {exc}")
    if problems:
        raise LockError("cannot resolve pins:\n  " + "\n  ".join(problems))
    return lock


def _dependencies_first(desired: dict[str, DesiredItem]) -> list[DesiredItem]:
    """Images after the images they are promoted from; everything else in source order."""
    ordered: list[DesiredItem] = []
    placed: set[str] = set()

    def place(item: DesiredItem, path: tuple[str, ...] = ()) -> None:
        if item.address in placed or item.address in path:
            return
        for dependency in item.dependencies:
            if dependency.startswith("Image/") and dependency in desired:
                place(desired[dependency], (*path, item.address))
        placed.add(item.address)
        ordered.append(item)

    for item in desired.values():
        place(item)
    return ordered


def stale_entries(locked: LockFile | None, current: LockFile) -> list[str]:
    """What differs between the lock file and what resolves now, one line per entry."""
    if locked is None:
        return [f"{LOCK_FILE} is missing: run `trainform lock` and commit it"]
    problems = []
    for section in ("images", "datasets", "code"):
        old, new = getattr(locked, section), getattr(current, section)
        for key in sorted(set(old) | set(new)):
            if key not in old:
                problems.append(f"{section} {key}: not in {LOCK_FILE}")
            elif key not in new:
                problems.append(f"{section} {key}: locked but no longer used by the specs")
            elif old[key] != new[key]:
                problems.append(
                    f"{section} {key}: locked {_short(old[key])}, now {_short(new[key])}"
                )
    return problems


def _short(entry: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(entry.items()))


def pins_from_state(resources: dict[str, Any]) -> LockFile:
    """The pins recorded by applied runs: what a plan without refresh or lock can use."""
    lock = LockFile()
    for resource in resources.values():
        if resource.kind != "TrainingJob":
            continue
        for outputs in resource.outputs.values():
            inputs = outputs.get("inputs") or {}
            image = inputs.get("image") or {}
            if image.get("digest", "unpinned") != "unpinned":
                lock.images[image["image"]] = {"digest": image["digest"]}
            for dataset in inputs.get("datasets", []):
                if dataset.get("manifestDigest", "unpinned") != "unpinned":
                    lock.datasets[dataset["dataset"]] = {
                        "manifestDigest": dataset["manifestDigest"]
                    }
            code = inputs.get("code")
            if code:
                lock.code[code["location"]] = {k: v for k, v in code.items() if k != "location"}
    return lock
