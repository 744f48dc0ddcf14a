"""Which files of a job's code folder changed since its run, so a re-run says why.

A run's code identity is one digest (planner/lockfile.py): it says *that* the code
changed, not *what*. Apply records beside a newly submitted run the code folder's file
list (`codeFiles`: relative path -> kind and a short content hash, for folders of at most
`MAX_RECORDED_FILES` files, the selection `.trainformignore` leaves), and plan compares it
with the folder now: the re-run's reason names the changed files, the first few and how
many in all. Only code folders of the spec repository have one; a pinned commit does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainform.planner.lockfile import code_entries

MAX_RECORDED_FILES = 2000
SHOWN_FILES = 5


def code_manifest(folder: Path, exclude: Sequence[Path] = ()) -> dict[str, str] | None:
    """Relative path -> `kind:hash16` of each file of the code folder's selection; None for
    a folder of more than MAX_RECORDED_FILES files or one that cannot be read."""
    try:
        entries = code_entries(folder, exclude)
    except (OSError, ValueError):
        return None
    if len(entries) > MAX_RECORDED_FILES:
        return None
    return {relative: f"{kind}:{digest[:16]}" for relative, kind, digest in entries}


def recorded_code_files(
    job: dict[str, Any], recorded: dict[str, Any], exclude: Sequence[Path]
) -> dict[str, str] | None:
    """What state keeps as `codeFiles` after applying `job`: a new run's folder as it was
    submitted, else what the same run had; None for neither."""
    launch = job.get("launch") or {}
    run_id = job.get("runId", recorded.get("runId"))
    if launch.get("code_dir") and run_id != recorded.get("runId"):
        return code_manifest(Path(launch["code_dir"]), exclude)
    return recorded.get("codeFiles") if run_id == recorded.get("runId") else None


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The paths added, removed or changed, sorted."""
    return sorted(
        path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
    )


def files_reason(changed: list[str]) -> str:
    """`code changed in 3 files (README.md, train.py and 1 more)`."""
    count = len(changed)
    shown = changed[:SHOWN_FILES]
    more = f" and {count - len(shown)} more" if count > len(shown) else ""
    noun = "file" if count == 1 else "files"
    return f"code changed in {count} {noun} ({', '.join(shown)}{more})"


def name_code_files(
    reasons: list[str], recorded: dict[str, Any], folder: str | None, exclude: Sequence[Path]
) -> list[str]:
    """`reasons` with the code digest's change named by the files that changed, where the
    run's file list is recorded and the folder can be read now."""
    before = recorded.get("codeFiles")
    digest = next((r for r in reasons if r.startswith("code.contentDigest:")), None)
    if not before or digest is None or folder is None:
        return reasons
    after = code_manifest(Path(folder), exclude)
    changed = changed_files(before, after) if after is not None else []
    return [files_reason(changed) if r == digest and changed else r for r in reasons]
