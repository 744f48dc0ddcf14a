"""The audit trail: append-only records of every state-changing command and force-unlock.

A record says who (the OS account from the process's uid, not `$USER`; host and pid; the CI
run and actor from the runner's environment; the Git author of the spec commit), what
(operation, plan digest, spec commit, environment, state lineage and serial) and how it
ended. Each command writes a `started` record when it takes the lock and a `completed` one
when it ends (planner.backends.base). The state backend keeps them as a hash chain
(planner.audit_chain): a local JSON-lines file beside the state, or one object per record
under `KEY.audit/` in the state bucket. `trainform state audit` lists them, `--verify`
checks that none was edited, removed or inserted.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

AUDIT_FORMAT_VERSION = 2

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


def os_user() -> str:
    """The account of this process's uid: `$USER` and `$LOGNAME` are anyone's to set."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def who(spec_root: Path | None = None) -> dict[str, Any]:
    found = {field: os.environ[name][:200] for name, field in CI_VARIABLES if os.environ.get(name)}
    person: dict[str, Any] = {
        "user": os_user(),
        "uid": os.getuid(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    claimed = os.environ.get("USER")
    if claimed and claimed != person["user"]:
        person["claimedUser"] = claimed[:200]
    if found:
        person["ci"] = found
    author = git_author(spec_root) if spec_root is not None else None
    if author:
        person["gitAuthor"] = author
    return person


def git_author(spec_root: Path) -> str | None:
    """`Name <email>` of the commit checked out at the spec folder (what CI applies)."""
    try:
        shown = subprocess.run(
            ["git", "-C", str(spec_root), "log", "-1", "--format=%an <%ae>", "HEAD", "--"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    author = shown.stdout.strip()
    return author[:200] if shown.returncode == 0 and author else None


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


def audit_record(operation: str, spec_root: Path | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "formatVersion": AUDIT_FORMAT_VERSION,
        "time": now(),
        "operation": operation,
        "who": who(spec_root),
        **{k: v for k, v in fields.items() if v is not None},
    }


def since(records: Iterable[dict[str, Any]], start: str | None) -> list[dict[str, Any]]:
    """Records at or after `start` (an ISO date or date-time, UTC), oldest first."""
    chosen = sorted(records, key=lambda r: str(r.get("time", "")))
    if not start:
        return chosen
    return [r for r in chosen if str(r.get("time", "")) >= start]


def matching(
    records: Iterable[dict[str, Any]], commands: Iterable[str] = (), who: str | None = None
) -> list[dict[str, Any]]:
    """Records of one of `commands` (any, if none) by someone whose user, host, CI actor
    or Git author contains `who` (case-insensitive)."""
    wanted = set(commands)
    found = []
    for record in records:
        if wanted and record.get("operation") not in wanted:
            continue
        if who:
            person = record.get("who") or {}
            ci = person.get("ci") or {}
            names = [person.get("user"), person.get("host"), person.get("gitAuthor"),
                     ci.get("githubActor"), ci.get("gitlabUser")]  # fmt: skip
            if not any(who.lower() in str(name).lower() for name in names if name):
                continue
        found.append(record)
    return found
