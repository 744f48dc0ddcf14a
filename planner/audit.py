"""The audit trail: one append-only record per apply, destroy and force-unlock.

A record says who (user, host, pid, and the CI run from the environment), what (operation,
plan digest, spec commit, environment, state lineage and serial before and after) and how
each change ended. The state backend keeps the records (`append_audit`, `read_audit`): a
local JSON-lines file beside the state, or one object per record under `KEY.audit/` in the
state bucket; nothing ever rewrites or deletes one. `trainform state audit` lists them.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

AUDIT_FORMAT_VERSION = 1

# (environment variable, field) pairs read from CI runners; values are identifiers, never secrets
CI_VARIABLES = (
    ("GITHUB_RUN_ID", "githubRunId"),
    ("GITHUB_RUN_ATTEMPT", "githubRunAttempt"),
    ("GITHUB_REPOSITORY", "githubRepository"),
    ("GITHUB_ACTOR", "githubActor"),
    ("GITHUB_SHA", "githubSha"),
    ("GITHUB_WORKFLOW", "githubWorkflow"),
    ("CI_PIPELINE_ID", "gitlabPipelineId"),
    ("CI_JOB_ID", "gitlabJobId"),
    ("CI_PROJECT_PATH", "gitlabProject"),
    ("GITLAB_USER_LOGIN", "gitlabUser"),
    ("CI_COMMIT_SHA", "gitlabSha"),
    ("BUILD_URL", "buildUrl"),
)


def who() -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    found = {field: os.environ[name][:200] for name, field in CI_VARIABLES if os.environ.get(name)}
    person: dict[str, Any] = {"user": user, "host": socket.gethostname(), "pid": os.getpid()}
    if found:
        person["ci"] = found
    return person


def spec_commit(spec_root: Path) -> str | None:
    """The commit checked out at the spec folder's repository, read from .git without git."""
    for folder in (spec_root.resolve(), *spec_root.resolve().parents):
        git = folder / ".git"
        if git.is_file():  # a worktree or submodule: `gitdir: PATH`
            text = git.read_text(errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            git = (folder / text.removeprefix("gitdir:").strip()).resolve()
        if not git.is_dir():
            continue
        try:
            head = (git / "HEAD").read_text().strip()
        except OSError:
            return None
        if not head.startswith("ref:"):
            return head if len(head) == 40 else None
        ref = head.removeprefix("ref:").strip()
        for base in (git, _common_dir(git)):
            path = base / ref
            if path.is_file():
                return path.read_text().strip()
            packed = base / "packed-refs"
            if packed.is_file():
                for line in packed.read_text(errors="replace").splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
        return None
    return None


def _common_dir(git: Path) -> Path:
    common = git / "commondir"
    if common.is_file():
        return (git / common.read_text().strip()).resolve()
    return git


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def audit_record(operation: str, **fields: Any) -> dict[str, Any]:
    return {
        "formatVersion": AUDIT_FORMAT_VERSION,
        "time": now(),
        "operation": operation,
        "who": who(),
        **{k: v for k, v in fields.items() if v is not None},
    }


def since(records: Iterable[dict[str, Any]], start: str | None) -> list[dict[str, Any]]:
    """Records at or after `start` (an ISO date or date-time, UTC), oldest first."""
    chosen = sorted(records, key=lambda r: str(r.get("time", "")))
    if not start:
        return chosen
    return [r for r in chosen if str(r.get("time", "")) >= start]


def render_audit_text(records: list[dict[str, Any]]) -> str:
    if not records:
        return "No audit records.\n"
    lines = []
    for record in records:
        person = record.get("who", {})
        ci = person.get("ci", {})
        run = ci.get("githubRunId") or ci.get("gitlabPipelineId")
        by = f"{person.get('user', '?')}@{person.get('host', '?')}"
        if run:
            by += f" (CI run {run})"
        summary = record.get("summary") or {}
        counts = ", ".join(f"{v} {k}" for k, v in sorted(summary.items()) if v)
        extra = []
        if record.get("environment"):
            extra.append(f"env {record['environment']}")
        if record.get("specCommit"):
            extra.append(f"commit {record['specCommit'][:12]}")
        if record.get("planDigest"):
            extra.append(f"plan {record['planDigest'][:19]}")
        if record.get("lock"):
            extra.append(f"lock {record['lock'].get('id')}")
        lines.append(
            f"{record.get('time')}  {record.get('operation'):<13} {by}"
            + (f"  {counts}" if counts else "")
            + (f"  [{'; '.join(extra)}]" if extra else "")
        )
    return "\n".join(lines) + "\n"
