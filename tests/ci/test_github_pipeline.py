"""The GitHub Actions example (examples/ci/github) run job by job, step by step, as written.

A temporary forge repository holds a local-provider variant of examples/platform
(tests/ci/platform_repo.py); `gh` is a stand-in that records what would be posted. One
story, in order, on one platform: a pull request gets validate, a saved plan and one
comment; its next push edits that comment; a pull request that a policy denies gets its
comment and a failed check; a merge whose reviewed plan is still fresh applies exactly it;
a merge whose reviewed plan went stale re-plans, shows the difference and waits for the
approval job; a schedule runs drift and opens one issue, which the next new drift edits.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.ci.github_runner import JobResult, Runner
from tests.ci.platform_repo import (
    commit_change,
    git,
    hand_edit,
    installed_plants,
    limits,
    live_rows,
    make_origin,
    merge,
    planted_files,
    restore_rows,
    write_standin_bin,
)

pytestmark = pytest.mark.slow  # about 45 s: ten pipelines, each installing trainform
WORKFLOW = Path(__file__).resolve().parents[2] / "examples/ci/github/workflows/trainform.yml"
DEVELOPMENT_TRAINFORM = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "trainform"
STANDINS = Path(__file__).resolve().parent / "standins"
REPOSITORY = "ml-platform/specs"
MARKER = "<!-- trainform-review -->"
KEY = "a-test-signing-key"


class Forge:
    """The repository, the gh stand-in's records and the runner, for one test."""

    def __init__(self, tmp_path: Path, venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.origin, self.live = tmp_path / "origin", tmp_path / "live"
        self.store = tmp_path / "artifacts"
        self.records = tmp_path / "gh.json"
        self.records.write_text(json.dumps(
            {"calls": [], "comments": [], "issues": [], "pulls": [], "runs": [],
             "artifacts": str(self.store)}
        ))
        bin_ = write_standin_bin(tmp_path / "bin")
        path = os.pathsep.join([str(STANDINS), str(bin_), str(venv / "bin"), "/usr/bin", "/bin"])
        make_origin(self.origin, self.live, DEVELOPMENT_TRAINFORM)
        workflow = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
        self.runner = Runner(workflow, self.origin, tmp_path / "work" / "repo", self.store, path)
        self.next_run = 1
        monkeypatch.setenv("GH_STANDIN_STATE", str(self.records))

    def state(self) -> dict[str, Any]:
        return json.loads(self.records.read_text())

    def save(self, state: dict[str, Any]) -> None:
        self.records.write_text(json.dumps(state))

    def context(self, event: str, sha: str, ref: str, **extra: str) -> dict[str, str]:
        return {
            "github.event_name": event, "github.sha": sha, "github.ref": ref,
            "github.repository": REPOSITORY, "github.token": "gh-token",
            "github.server_url": "https://github.example.com",
            "github.event.pull_request.number": extra.pop("number", ""),
            "github.event.pull_request.base.sha": extra.pop("base", ""),
            "github.event.pull_request.head.sha": extra.pop("head", ""),
            **{f"secrets.{name}": f"{name.lower()}-value" for name in SECRETS},
            "secrets.TRAINFORM_PLAN_KEY": KEY,
            **extra,
        }

    def pipeline(self, context: dict[str, str], jobs: list[str]) -> dict[str, JobResult]:
        """Run `jobs` in order (the order of their `needs`); a job whose `needs` failed
        is skipped as GitHub does, unless its `if:` says `!cancelled()`."""
        run_id = str(self.next_run)
        self.next_run += 1
        if context["github.event_name"] == "pull_request":
            state = self.state()
            state["runs"].append({"id": run_id, "head_sha": context["github.sha"],
                                  "event": "pull_request"})
            self.save(state)
        results: dict[str, JobResult] = {}
        for name in jobs:
            job = self.runner.workflow["jobs"][name]
            needs = [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", [])
            for need in needs:
                for key, value in results[need].outputs.items():
                    context[f"needs.{need}.outputs.{key}"] = value
            if any(results[n].failed for n in needs) and "!cancelled()" not in job.get("if", ""):
                results[name] = JobResult(name, ran=False)
                continue
            results[name] = self.runner.run_job(name, dict(context), run_id)
        return results

    def pull_request(self, number: int, head: str) -> dict[str, JobResult]:
        base = git(self.origin, "rev-parse", "main")
        context = self.context("pull_request", head, f"refs/pull/{number}/merge",
                               number=str(number), base=base, head=head)
        return self.pipeline(context, ["plan", "comment", "apply", "drift"])

    def merged(self, number: int, head: str, branch: str) -> dict[str, JobResult]:
        sha = merge(self.origin, branch)
        state = self.state()
        state["pulls"].append({"number": number, "merge_commit_sha": sha, "head": {"sha": head}})
        self.save(state)
        return self.pipeline(self.context("push", sha, "refs/heads/main"), ["plan", "apply"])

    def scheduled(self) -> dict[str, JobResult]:
        sha = git(self.origin, "rev-parse", "main")
        return self.pipeline(self.context("schedule", sha, "refs/heads/main"), ["drift"])


SECRETS = [
    f"TRAINFORM_{scope}{name}"
    for scope in ("READONLY_", "")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "REGISTRY_USERNAME",
                 "REGISTRY_TOKEN")
]


def quotas(forge: Forge, team: str) -> str:
    return (forge.origin / "teams" / team / "quotas.yaml").read_text(encoding="utf-8")


def review_comments(forge: Forge, number: int) -> list[dict[str, Any]]:
    return [c for c in forge.state()["comments"] if c["pr"] == number]


def test_pull_requests_merges_and_drift_on_github(
    tmp_path: Path, clean_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forge = Forge(tmp_path, clean_python, monkeypatch)
    debug = quotas(forge, "eval-team")

    # A pull request: validate, a saved plan, one review comment.
    first = commit_change(forge.origin, "more-debug-jobs", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: 6"),
    })
    # Someone else's comment that starts with the marker is never the one to edit.
    spoof = {"id": 1, "pr": 1, "user": {"login": "mallory"}, "body": MARKER + "\nfake"}
    state = forge.state()
    state["comments"].append(spoof)
    forge.save(state)
    results = forge.pull_request(1, first)
    plan = results["plan"]
    assert not plan.failed, plan.log
    assert [s.name for s in plan.steps][4:7] == ["Validate", "Plan", "Review"]
    assert "are valid" in plan.steps[4].output
    assert plan.outputs == {"validate": "0", "plan": "2", "review": "0"}
    reviewed = forge.store / "1" / "trainform-plan"
    assert sorted(p.name for p in reviewed.iterdir()) == [
        "plan.err", "plan.md", "plan.tfplan", "review.md", "validate.txt"
    ]
    assert json.loads((reviewed / "plan.tfplan").read_text())["signature"].startswith("hmac")
    assert not results["comment"].failed, results["comment"].log
    assert not results["apply"].ran and not results["drift"].ran
    spoofed, comment = review_comments(forge, 1)
    assert spoofed == spoof
    assert comment["body"].startswith(MARKER) and "runningJobs" in comment["body"]

    # The next push edits that comment: still one.
    second = commit_change(forge.origin, "more-debug-jobs", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: 6")
        .replace("maxWallTime: 2h", "maxWallTime: 3h"),
    })
    results = forge.pull_request(1, second)
    assert not results["comment"].failed, results["comment"].log
    assert review_comments(forge, 1)[0] == spoof
    (edited,) = review_comments(forge, 1)[1:]
    assert edited["id"] == comment["id"] and "3h" in edited["body"]
    assert ["api", "--method", "PATCH"] == forge.state()["calls"][-1][:3]

    # A policy denial: the comment says so, and the check fails. The branch also plants
    # files under every trusted path: none is read or installed.
    sentinel = tmp_path / "planted-code-ran"
    denied = commit_change(forge.origin, "own-queue", "main", {
        "teams/eval-team/queue.yaml": "apiVersion: trainform/v1\nkind: Queue\n"
        "metadata: {name: eval-private}\nspec:\n  pools:\n"
        "    - pool: a100\n      nominalQuota: {gpu: 1}\n",
        **planted_files(sentinel),
    })
    results = forge.pull_request(2, denied)
    assert not results["plan"].failed and results["plan"].outputs["plan"] == "3"
    comment_job = results["comment"]
    assert comment_job.failed
    assert comment_job.steps[-1].name == "Fail on a policy denial or an error"
    assert "validate exited 1, plan exited 3" in comment_job.steps[-1].output
    (denial,) = review_comments(forge, 2)
    assert "**Plan:** a policy denies this change (exit code 3)" in denial["body"]
    assert denial["body"].count(MARKER) == 1
    assert "Queue/eval-private" in denial["body"] and "project-isolation" in denial["body"]
    assert "@eval-leads" in denial["body"] and "@mallory" not in denial["body"]
    assert not sentinel.exists() and installed_plants(clean_python) == []

    # Another pull request, reviewed while the first is still open.
    other = commit_change(forge.origin, "finetune-wall-time", "main", {
        "teams/alignment/quotas.yaml": quotas(forge, "alignment").replace(
            "maxWallTime: 2h", "maxWallTime: 90m"),
    })
    assert not forge.pull_request(3, other)["comment"].failed

    # Merge of the first: its reviewed plan is still what main plans, and is applied.
    results = forge.merged(1, second, "more-debug-jobs")
    apply = results["apply"]
    assert not apply.failed, apply.log
    assert apply.outputs == {"fresh": "true"}
    # The artifact of the run at the PR's last head, not the first push's.
    head_run = next(r["id"] for r in forge.state()["runs"] if r["head_sha"] == second)
    downloads = [c[:5] for c in forge.state()["calls"] if c[:2] == ["run", "download"]]
    assert downloads == [["run", "download", head_run, "--name", "trainform-plan"]]
    assert "Apply complete" in apply.steps[-2].output
    assert limits(forge.live, "eval-team/hpc-debug") == {"gpu": "4", "runningJobs": 6,
                                                    "maxWallTime": "3h"}

    # Merge of the other: its plan was made before the first was applied, so it is stale.
    results = forge.merged(3, other, "finetune-wall-time")
    apply = results["apply"]
    assert not apply.failed, apply.log
    assert apply.outputs == {"fresh": "false"}
    step = apply.steps[-2]
    assert "The reviewed plan is stale" in step.output and "--- reviewed.txt" in step.output
    assert "Apply complete" not in step.output
    replanned = forge.runner.workflow["jobs"]["apply-replanned"]
    assert replanned["environment"] == "production-approval" and replanned["needs"] == "apply"
    context = forge.context("push", git(forge.origin, "rev-parse", "main"), "refs/heads/main")
    context["needs.apply.outputs.fresh"] = "false"
    approved = forge.runner.run_job("apply-replanned", context, str(forge.next_run - 1))
    assert not approved.failed, approved.log
    assert "Apply complete" in approved.steps[-1].output
    assert limits(forge.live, "alignment/hpc-debug")["maxWallTime"] == "1h30m"

    # Scheduled drift: nothing drifted, no issue; a hand change opens one issue, the next
    # new drift edits it; an admin's own drift run in between changes nothing for the
    # schedule, and once the drift is undone the next scheduled run closes the issue.
    results = forge.scheduled()
    assert not results["drift"].failed, results["drift"].log
    assert forge.state()["issues"] == []
    rows = live_rows(forge.live)
    hand_edit(forge.live, "Queue/pretrain", "defaultPriority", 1001)
    results = forge.scheduled()
    assert not results["drift"].failed, results["drift"].log
    drift_run = str(forge.next_run - 1)
    assert "<html" in (forge.store / drift_run / "drift-report" / "drift.html").read_text()
    (issue,) = forge.state()["issues"]
    assert issue["body"].startswith("<!-- trainform-drift env=prod -->")
    assert "Drift" in issue["title"]
    hand_edit(forge.live, "Queue/finetune", "defaultPriority", 501)
    forge.scheduled()
    (edited_issue,) = forge.state()["issues"]
    assert edited_issue["number"] == issue["number"]
    assert ["issue", "edit", str(issue["number"])] == forge.state()["calls"][-1][:3]
    admin = tmp_path / "admin"
    git(tmp_path, "clone", "-q", str(forge.origin), str(admin))
    manual = subprocess.run(
        [str(DEVELOPMENT_TRAINFORM), "drift", str(admin), "--env", "prod"],
        capture_output=True, text=True, check=False,
    )
    assert manual.returncode == 2, manual.stderr
    restore_rows(forge.live, rows)
    results = forge.scheduled()
    assert not results["drift"].failed, results["drift"].log
    (closed,) = forge.state()["issues"]
    assert closed["number"] == issue["number"] and closed["state"] == "closed"
    assert "No open drift in `prod`" in closed["closingComment"]
