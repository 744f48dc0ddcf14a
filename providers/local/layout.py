"""Where a run's files live under the local root, and the snapshot of its code.

    <root>/runs/<project or _global>/<job>/<run_id>/
        code/                  snapshot of the job's code, taken at the run's first attempt
        output/                TRAINFORM_OUTPUT_DIR (the final model)
        logs/attempt-<n>.log   supervisor and job output of each attempt
        progress.json          TRAINFORM_PROGRESS_FILE
        evaluations/<suite>/   code/, metrics.json, attempt-<n>.log, progress.json
    <root>/checkpoints/<project or _global>/<job>/<run_id>/step-<N>/

A checkpoint prefix on the job replaces `<root>/checkpoints/<project>/<job>`: a relative
prefix is under the local root (and must stay there: `..` or a link leading out is refused),
`file://...` or an absolute path (from trainform.yaml's storage.checkpoints, or a data root
validate allowed) is taken as given, and an `s3://` prefix keeps the checkpoints on S3
(the job writes them to `<run>/checkpoints/`, from where the supervisor publishes them:
providers/local/checkpoint_sync.py). Each
run still gets its own `<run_id>` folder under it, so a new run never resumes from the
checkpoints of another. Code is copied once per run (resumes reuse the copy), so editing
the spec folder never changes a run that exists.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainform.providers.errors import PermanentProviderError
from trainform.providers.local.code_ignore import code_ignore, is_ignored
from trainform.specs.confinement import PathEscape, confined_path

if TYPE_CHECKING:
    import pathspec

GLOBAL = "_global"
SKIPPED_IN_SNAPSHOT = {".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"}


LOCK_FILE_NAME = "trainform.lock"
"""The spec folder's lock (planner.lockfile.LOCK_FILE): never part of a code snapshot."""


def job_parts(address: str) -> tuple[str, str]:
    """(project folder, job name) of a job address: `TrainingJob/<project>/<name>`."""
    parts = address.split("/")
    return (parts[1] if len(parts) == 3 else GLOBAL), parts[-1]


def suite_name(suite: str) -> str:
    """The folder and id part of an evaluation suite given by address or name."""
    return suite.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class RunLayout:
    """The folders of one run, derived from the local root and the launch."""

    root: Path
    address: str
    run_id: str
    checkpoint_prefix: str = ""

    @property
    def run_dir(self) -> Path:
        project, job = job_parts(self.address)
        return self.root / "runs" / project / job / self.run_id

    @property
    def checkpoint_uri(self) -> str:
        """`<prefix>/<run id>` for checkpoints kept on S3, else ""."""
        if self.checkpoint_prefix.startswith("s3://"):
            return f"{self.checkpoint_prefix.rstrip('/')}/{self.run_id}"
        return ""

    @property
    def checkpoint_dir(self) -> Path:
        if self.checkpoint_uri:
            return self.run_dir / "checkpoints"  # staging: published to S3 as they appear
        prefix = self.checkpoint_prefix.removeprefix("file://")
        if prefix and not prefix.startswith("/"):
            try:
                confined_path(self.root, prefix, within=f"the local root {self.root}")
            except PathEscape as exc:
                raise PermanentProviderError(
                    f"cannot place checkpoints under prefix {self.checkpoint_prefix!r}: {exc}"
                ) from None
        if prefix:
            base = self.root / prefix  # an absolute prefix stays as it is
        else:
            project, job = job_parts(self.address)
            base = self.root / "checkpoints" / project / job
        return base / self.run_id

    @property
    def output_dir(self) -> Path:
        return self.run_dir / "output"

    @property
    def progress_file(self) -> Path:
        return self.run_dir / "progress.json"

    def log(self, attempt: int) -> Path:
        return self.run_dir / "logs" / f"attempt-{attempt}.log"

    def evaluation_dir(self, suite: str) -> Path:
        return self.run_dir / "evaluations" / suite_name(suite)


def _skipped(
    directory: Path,
    names: list[str],
    excluded: set[Path],
    rules: pathspec.PathSpec | None,
    prefix: str,
) -> set[str]:
    """The entries of `directory` (at `prefix` in the code folder) a snapshot leaves out:
    version-control folders, caches, the excluded paths, what the code folder's
    `.trainformignore` lists, and anything that is not a folder, a regular file or a link."""
    skipped = set()
    for name in names:
        path = directory / name
        folder = path.is_dir() and not path.is_symlink()
        if name in SKIPPED_IN_SNAPSHOT or path.resolve() in excluded:
            skipped.add(name)
        elif is_ignored(rules, prefix + name, folder):
            skipped.add(name)
        elif not path.is_symlink() and not (path.is_dir() or path.is_file()):
            skipped.add(name)  # sockets, fifos, devices: copying them blocks or fails
    return skipped


def code_files(source: Path, exclude: tuple[Path, ...] = ()) -> list[tuple[str, Path]]:
    """What a snapshot of `source` holds: (relative POSIX path, path) of each regular file
    and symbolic link, sorted by path. Links are entries of their own, never followed
    (the snapshot copies them as links); empty folders are not entries.

    The one file selection: `snapshot_code` copies exactly these, and the code identity
    (planner.lockfile) is the digest of exactly these, so the two cannot disagree. What
    the code folder's `.trainformignore` lists is left out (providers/local/code_ignore.py)."""
    excluded = {path.resolve() for path in exclude}
    rules = code_ignore(source)
    found: list[tuple[str, Path]] = []

    def walk(directory: Path, prefix: str) -> None:
        names = sorted(os.listdir(directory))
        skipped = _skipped(directory, names, excluded, rules, prefix)
        for name in names:
            if name in skipped:
                continue
            path = directory / name
            relative = f"{prefix}{name}"
            if path.is_dir() and not path.is_symlink():
                walk(path, relative + "/")
            else:
                found.append((relative, path))

    walk(source, "")
    return sorted(found)


def snapshot_code(source: Path, destination: Path, exclude: tuple[Path, ...] = ()) -> bool:
    """Copy `source` to `destination` once; False when the snapshot already existed.

    The copy is made in a sibling temporary folder and renamed into place, so a crash
    never leaves a half snapshot behind. What is copied is `code_files`: version-control
    folders, caches and any path in `exclude` (the local root, when it sits inside the code
    folder) are skipped.
    """
    if destination.exists():
        return False
    if not source.is_dir():
        raise FileNotFoundError(f"code folder {source} does not exist")
    excluded = {path.resolve() for path in exclude}
    rules = code_ignore(source)

    def ignore(directory: str, names: list[str]) -> set[str]:
        inside = Path(directory).relative_to(source).as_posix()
        prefix = "" if inside == "." else inside + "/"
        return _skipped(Path(directory), names, excluded, rules, prefix)

    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".code-", dir=destination.parent))
    try:
        shutil.copytree(source, staging / "code", symlinks=True, ignore=ignore)
        os.replace(staging / "code", destination)
    except OSError:
        if not destination.exists():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return True
