"""Specs as they are at a Git ref, read without a checkout and without running anything.

`open_side` gives one side of a review: the working tree (head's default) or the files of a
commit, written into a temporary folder from Git's object database (`git ls-tree` and
`git cat-file --batch`). Only regular files below the spec folder are written: symlinks
and submodules of the ref are skipped, so a pull request cannot make the review read a
file outside the repository. No hook, filter or template of the ref runs; the loader
(specs.load_specs) then reads the files in its sandbox.

Files are named in output as they are in the working tree (the spec folder as given on
the command line, e.g. `specs/queues.yaml:12:7`): `SpecSide.relabel` maps the temporary
folder back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from trainform.policies.review.errors import GitRefError

WORKING_TREE = "working tree"
_REGULAR_MODES = {"100644", "100755"}


@dataclass
class SpecSide:
    """One side of a review: where its spec folder is on disk and how to name its files."""

    side: str
    ref: str
    commit: str | None
    folder: Path
    display: str
    _temporary: Path | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """`HEAD~1 (1a2b3c4)`, or `working tree`."""
        if self.commit is None:
            return self.ref
        return f"{self.ref} ({self.commit[:7]})"

    def relabel(self, text: str) -> str:
        """A path or `file:line:col` under the temporary folder, named as in the worktree."""
        prefix = os.path.normpath(str(self.folder))
        if self._temporary is None or not text.startswith(prefix):
            return text
        rest = text[len(prefix) :].lstrip(os.sep)
        if self.display in ("", "."):
            return rest
        return os.path.join(self.display, rest) if rest else self.display

    def close(self) -> None:
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    try:
        result = subprocess.run(
            # No bare repository found by discovery (a spec folder dressed as one would bring
            # its own config) and no fsmonitor command: nothing of the ref configures git.
            [
                "git",
                "-c",
                "safe.bareRepository=explicit",
                "-c",
                "core.fsmonitor=false",
                "-C",
                str(repo),
                *args,
            ],
            input=data,
            capture_output=True,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        )
    except FileNotFoundError as exc:
        raise GitRefError("cannot read Git refs: git is not installed (not on PATH)") from exc
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitRefError(f"git {args[0]} failed: {message[-1] if message else 'no output'}")
    return result.stdout


def locate_repository(spec_dir: str) -> tuple[Path, str]:
    """The repository holding `spec_dir` and the folder's path inside it (`` for the root)."""
    if not Path(spec_dir).is_dir():
        raise GitRefError(f"cannot review {spec_dir}: not a folder")
    try:
        top = _git(Path(spec_dir), "rev-parse", "--show-toplevel").decode().strip()
        prefix = _git(Path(spec_dir), "rev-parse", "--show-prefix").decode().strip()
    except GitRefError as exc:
        raise GitRefError(
            f"cannot review {spec_dir}: not inside a Git repository ({exc})"
        ) from None
    return Path(top), prefix.rstrip("/")


def resolve_commit(repo: Path, ref: str) -> str:
    """The full commit id `ref` names; an error naming the ref if it names none."""
    if not ref or ref.startswith("-"):
        raise GitRefError(f"cannot read ref {ref!r}: not a revision")
    try:
        out = _git(
            repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"
        )
    except GitRefError:
        raise GitRefError(
            f"cannot read ref {ref!r}: no such commit in {repo} "
            "(fetch it first; CI checkouts are often shallow: fetch-depth 0)"
        ) from None
    return out.decode().strip()


def export_tree(repo: Path, commit: str, prefix: str, destination: Path) -> int:
    """Write the regular files below `prefix` at `commit` under `destination`; their count."""
    listing = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", prefix or ".")
    entries: list[tuple[str, str]] = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, oid = meta.decode().split(" ")
        if kind == "blob" and mode in _REGULAR_MODES:
            entries.append((oid, raw_path.decode("utf-8", "surrogateescape")))
    blobs = _git(repo, "cat-file", "--batch", data="".join(f"{o}\n" for o, _ in entries).encode())
    offset = 0
    for oid, path in entries:
        header_end = blobs.index(b"\n", offset)
        size = int(blobs[offset:header_end].split(b" ")[2])
        content = blobs[header_end + 1 : header_end + 1 + size]
        offset = header_end + 1 + size + 1
        relative = Path(path).relative_to(prefix) if prefix else Path(path)
        if ".." in relative.parts or relative.is_absolute():
            continue
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        del oid
    return len(entries)


def open_side(side: str, spec_dir: str, ref: str | None) -> SpecSide:
    """The spec folder of one side: the working tree when `ref` is None, else a commit's."""
    display = os.path.normpath(spec_dir)
    if ref is None:
        return SpecSide(side, WORKING_TREE, None, Path(spec_dir), display)
    repo, prefix = locate_repository(spec_dir)
    commit = resolve_commit(repo, ref)
    temporary = Path(tempfile.mkdtemp(prefix=f"trainform-review-{side}-"))
    folder = temporary / "specs"
    folder.mkdir()
    try:
        if export_tree(repo, commit, prefix, folder) == 0 and prefix:
            raise GitRefError(f"cannot read {prefix}/ at {ref}: no such folder in that commit")
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return SpecSide(side, ref, commit, folder, display, temporary)
