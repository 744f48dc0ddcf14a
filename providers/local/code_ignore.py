"""`.trainformignore` of a code folder: the files a job's code identity and snapshot leave out.

A code folder of the spec repository (`code: {repo: ., path: ...}`) may hold a
`.trainformignore` at its root, in gitignore syntax (`#` comments, `!` re-includes, a
leading `/` anchors at the code root, a trailing `/` matches folders only, `*`, `?`, `**`).
Patterns are matched against paths relative to the code root, so they select only inside
it; an ignored folder is not entered (nothing below it can be re-included). What it
ignores is neither copied into a run's snapshot nor part of the code identity
(planner.lockfile.code_digest), so editing a README it lists re-runs nothing. The file
itself stays in both: changing the rules changes what runs.

A code folder that holds `trainform.yaml` is the spec folder itself: its `.trainformignore`
says which files are not specs, and does not apply to code. The file must be a regular
file, not a link, at most 64 KiB of UTF-8 text; otherwise `CodeIgnoreError`.
"""

from __future__ import annotations

from pathlib import Path

import pathspec

CODE_IGNORE_FILE = ".trainformignore"
SPEC_CONFIG_FILE = "trainform.yaml"
MAX_BYTES = 64 * 1024


class CodeIgnoreError(ValueError):
    """The code folder's `.trainformignore` cannot be used."""


def code_ignore(source: Path) -> pathspec.PathSpec | None:
    """The rules of `source/.trainformignore`, or None when there are none to apply."""
    path = source / CODE_IGNORE_FILE
    if (source / SPEC_CONFIG_FILE).exists() or not (path.exists() or path.is_symlink()):
        return None
    if path.is_symlink() or not path.is_file():
        raise CodeIgnoreError(f"{path} must be a plain file, not a link or a folder")
    with path.open("rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise CodeIgnoreError(f"{path} is larger than {MAX_BYTES // 1024} KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CodeIgnoreError(f"{path} is not UTF-8 text") from None
    return pathspec.GitIgnoreSpec.from_lines(text.splitlines())


def is_ignored(rules: pathspec.PathSpec | None, relative: str, folder: bool) -> bool:
    """Whether the entry at `relative` (POSIX, from the code root) is left out."""
    if rules is None or relative == CODE_IGNORE_FILE:
        return False
    return rules.match_file(relative + "/" if folder else relative)
