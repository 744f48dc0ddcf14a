"""Finding the spec files of a spec folder without reading anything that is not a spec.

`find_spec_files` walks the folder itself (no `os.walk`): hidden entries are skipped,
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

from specs.confinement import PathEscape, is_special, is_within, real_path
from specs.errors import Diagnostic, Location, Severity

CONFIG_FILE = "trainform.yaml"
SPEC_SUFFIXES = (".yaml", ".yml")


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
    found: list[Path] = []
    refused: list[Diagnostic] = []
    pending = [root]
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
            path = Path(entry.path)
            is_spec = name.endswith(SPEC_SUFFIXES) and not (folder == root and name == CONFIG_FILE)
            if entry.is_symlink():
                try:
                    to_folder = entry.is_dir()
                except OSError:
                    to_folder = False
                if not (to_folder or is_spec):
                    continue
                problem = unsafe_entry(path, real_root)
                if problem is not None:
                    refused.append(refusal(problem, display_path(root_display, path, root)))
                    continue
                if to_folder:
                    continue  # walked where it really is, inside the folder
                found.append(path)
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(path)
            elif is_spec:
                if entry.is_file(follow_symlinks=False):
                    found.append(path)
                else:
                    problem = unsafe_entry(path, real_root)
                    if problem is not None:
                        refused.append(refusal(problem, display_path(root_display, path, root)))
    found.sort(key=lambda p: p.relative_to(root).as_posix())
    return found, refused
