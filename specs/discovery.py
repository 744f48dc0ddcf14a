"""Finding the spec files of a spec folder without reading anything that is not a spec.

`find_spec_files` walks the folder itself (no `os.walk`): hidden entries are skipped,
entries matching `.trainformignore` at the root (gitignore syntax; an ignored folder is not
entered, so nothing below it can be re-included) are skipped,
links to folders are never descended (so a loop of links cannot hang the walk, and a
folder linked from inside is read where it really is), and the walk keeps its own stack
(a deep tree cannot exhaust recursion). A spec file or folder that is a symbolic link
whose real path leaves the spec folder, a link in a loop, and a spec file that is not a
plain file (a FIFO would block the read; a device or a /proc file is not a spec) are
refused before anything opens them: each is a diagnostic naming the file and never
quoting a byte of it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from trainform.specs.confinement import PathEscape, is_special, is_within, real_path
from trainform.specs.errors import Diagnostic, Location, Severity

if TYPE_CHECKING:
    import pathspec

CONFIG_FILE = "trainform.yaml"
IGNORE_FILE = ".trainformignore"
SPEC_SUFFIXES = (".yaml", ".yml")
MAX_IGNORE_BYTES = 64 * 1024


def missing_config(root_display: str) -> Diagnostic:
    """The error for a spec folder without trainform.yaml at its root."""
    return Diagnostic(
        Severity.ERROR,
        "missing-config",
        f"{root_display} is not a spec folder: it has no {CONFIG_FILE} at its root",
        Location(os.path.join(root_display, CONFIG_FILE), 1, 1),
        expected=f"{CONFIG_FILE} (providers, state backend, environments) at the root",
        found="no such file",
        detail=f"run `trainform init {root_display}` to write a starting {CONFIG_FILE} and "
        f"{IGNORE_FILE}, or give the folder that holds {CONFIG_FILE}",
    )


def ignore_rules(root: Path, real_root: Path) -> tuple[pathspec.PathSpec | None, list[Diagnostic]]:
    """The patterns of `.trainformignore` at the root (None when there is none)."""
    path = root / IGNORE_FILE
    if not path.exists() and not path.is_symlink():
        return None, []
    display = IGNORE_FILE
    problem = unsafe_entry(path, real_root)
    if problem is not None:
        return None, [refusal(problem, display)]
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_IGNORE_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [_ignore_problem(display, f"cannot be read as UTF-8 text ({exc})")]
    if len(data) > MAX_IGNORE_BYTES:
        return None, [_ignore_problem(display, f"is larger than {MAX_IGNORE_BYTES} bytes")]
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(text.splitlines()), []


def _ignore_problem(display: str, summary: str) -> Diagnostic:
    return Diagnostic(
        Severity.ERROR,
        "invalid-ignore-file",
        f"{display} {summary}",
        Location(display, 1, 1),
        expected="gitignore patterns, one a line",
    )


def display_path(root_display: str, path: Path, root: Path) -> str:
    """How diagnostics name `path`: under the spec folder as the user spelled it."""
    return os.path.normpath(os.path.join(root_display, path.relative_to(root).as_posix()))


def unsafe_entry(path: Path, real_root: Path) -> Diagnostic | None:
    """Why `path` (a spec file, a folder or trainform.yaml) must not be read, or None.

    The returned diagnostic has no location yet; `refusal` places it. Nothing is opened:
    lstat, stat and readlink only.
    """
    try:
        linked = path.is_symlink()
    except OSError:
        return None  # the read reports it
    if linked:
        try:
            target = real_path(path)
        except PathEscape:
            return _problem(
                "path-escape",
                "is a symbolic link in a loop",
                "a symbolic link that never reaches a file",
            )
        if not is_within(target, real_root) or is_special(target):
            return _problem(
                "path-escape",
                "is a symbolic link that leads outside the spec folder; it was not read",
                "a symbolic link leaving the spec folder",
            )
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # a dangling link inside the folder: the read reports it
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return _problem(
        "special-file",
        "is not a plain file (a FIFO, socket or device); it was not read",
        "a special file",
    )


LINK_REMEDY = (
    "replace the link with the file itself, or move what it points to into the spec "
    "folder; trainform reads nothing outside the spec folder"
)
SPECIAL_REMEDY = "replace it with a plain file, or rename it so it does not end in .yaml or .yml"


def _problem(code: str, summary: str, found: str) -> Diagnostic:
    return Diagnostic(
        Severity.ERROR,
        code,
        summary,
        expected="plain spec files and folders inside the spec folder",
        found=found,
        detail=SPECIAL_REMEDY if code == "special-file" else LINK_REMEDY,
    )


def refusal(problem: Diagnostic, display: str) -> Diagnostic:
    """`problem` (from unsafe_entry) naming the file it is about."""
    return Diagnostic(
        problem.severity,
        problem.code,
        f"{display} {problem.summary}",
        Location(display, 1, 1),
        expected=problem.expected,
        found=problem.found,
        detail=problem.detail,
    )


def refused_file(path: Path, root: Path, display: str) -> Diagnostic | None:
    """The diagnostic refusing one file of the spec folder (trainform.yaml), or None."""
    problem = unsafe_entry(path, real_path(root))
    return None if problem is None else refusal(problem, display)


def find_spec_files(root: Path, root_display: str) -> tuple[list[Path], list[Diagnostic]]:
    """Spec files under `root` in a stable order, and a diagnostic per refused entry."""
    real_root = real_path(root)
    found: list[tuple[str, Path]] = []
    ignored, refused = ignore_rules(root, real_root)
    root_text = os.fspath(root)
    skip = len(root_text) + (0 if root_text.endswith("/") else 1)  # entry.path -> relative
    pending = [root_text]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            is_spec = name.endswith(SPEC_SUFFIXES) and not (
                folder == root_text and name == CONFIG_FILE
            )
            linked = entry.is_symlink()
            if not (is_spec or linked or entry.is_dir(follow_symlinks=False)):
                continue  # data, code, anything else: never a spec, never opened here
            relative = entry.path[skip:]
            if ignored is not None:
                if ignored.match_file(relative + "/" if _is_dir(entry) else relative):
                    continue
            path = Path(entry.path)
            if linked:
                to_folder = _is_dir(entry)
                if not (to_folder or is_spec):
                    continue
                problem = unsafe_entry(path, real_root)
                if problem is not None:
                    refused.append(refusal(problem, display_path(root_display, path, root)))
                    continue
                if to_folder:
                    continue  # walked where it really is, inside the folder
                found.append((relative, path))
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif is_spec:
                if entry.is_file(follow_symlinks=False):
                    found.append((relative, path))
                else:
                    problem = unsafe_entry(path, real_root)
                    if problem is not None:
                        refused.append(refusal(problem, display_path(root_display, path, root)))
    found.sort(key=lambda item: item[0])
    return [path for _, path in found], refused


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
