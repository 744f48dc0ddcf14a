"""A fixture spec repository for review tests: git init, a base commit, changes on top.

The base platform is one 64-GPU pool shared by two teams' queues in one cohort, each with a
32-GPU nominal quota and a Quota for its project. `move_gpus` is the pull request of the
acceptance criteria: 8 GPUs of nominal quota move from team-a to team-b.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# Tenancy: platform kinds from platform/ and the teams' quota files (see project-isolation).
TENANCY = 'project-isolation: {adminPaths: ["platform/**", "teams/*/quota.yaml"]}'
# A trusted policies.yaml (--policies) needs the same, or it denies an unconfigured tenancy.
TRUSTED_SETTINGS = f"settings:\n  {TENANCY}\n"

CONFIG = f"""\
apiVersion: trainform/v1
providers:
  - {{name: local, type: local}}
policies:
  settings:
    {TENANCY}
"""

POOL = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: gpu}
spec:
  provider: local
  nodes: 8
  accelerator: {type: nvidia-h100-80gb, count: 8}
  cpu: 64
  memory: 512Gi
"""

PROJECTS = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: team-a}
spec: {owners: [a@example.com], specPaths: ["teams/team-a/**"]}
---
apiVersion: trainform/v1
kind: Project
metadata: {name: team-b}
spec: {owners: [b@example.com], specPaths: ["teams/team-b/**"]}
"""


def queue(name: str, gpus: int, priority: int) -> str:
    return f"""\
apiVersion: trainform/v1
kind: Queue
metadata: {{name: {name}}}
spec:
  cohort: research
  pools:
    - pool: gpu
      nominalQuota: {{gpu: {gpus}}}
      borrowingLimit: {{gpu: 16}}
      lendingLimit: {{gpu: 16}}
  defaultPriority: {priority}
  preemption: {{reclaimWithinCohort: Any}}
"""


def quota(project: str, gpus: int = 64) -> str:
    return f"""\
apiVersion: trainform/v1
kind: Quota
metadata: {{name: {project}, project: {project}}}
spec:
  queue: {project}
  limits: {{gpu: {gpus}, runningJobs: 20}}
"""


def queues(team_a: int, team_b: int) -> str:
    return queue("team-a", team_a, 100) + "---\n" + queue("team-b", team_b, 100)


CODEOWNERS = "platform/ @ml-platform\nteams/team-a/ @team-a-leads\n"

BASE = {
    "trainform.yaml": CONFIG,
    "CODEOWNERS": CODEOWNERS,
    "platform/pools.yaml": POOL,
    "platform/projects.yaml": PROJECTS,
    "platform/queues.yaml": queues(32, 32),
    "teams/team-a/quota.yaml": quota("team-a"),
    "teams/team-b/quota.yaml": quota("team-b"),
}


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        # Fixed dates make commit ids, and so the golden output, the same on every run.
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    result = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout


def commit(repo: Path, files: dict[str, str | None], message: str) -> None:
    """Write (or with None, delete) files below `repo` and commit them."""
    for relative, text in files.items():
        path = repo / relative
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def make_repository(root: Path, subdir: str = "") -> Path:
    """A repository at `root` with the base platform committed (under `subdir`, if given);
    returns the spec folder."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    specs = root / subdir if subdir else root
    prefix = f"{subdir}/" if subdir else ""
    commit(root, {prefix + k: v for k, v in BASE.items()}, "base platform")
    return specs


def move_gpus(root: Path, subdir: str = "") -> None:
    """The pull request: 8 GPUs of nominal quota from team-a to team-b."""
    prefix = f"{subdir}/" if subdir else ""
    commit(root, {prefix + "platform/queues.yaml": queues(24, 40)}, "move 8 GPUs to team-b")
