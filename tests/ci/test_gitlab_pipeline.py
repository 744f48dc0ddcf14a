"""The GitLab CI example (examples/ci/gitlab) run job by job, as written, against a stand-in
of GitLab's API (tests/ci/gitlab_api.py) that records what would be posted.

The same story as the GitHub test, on a local-provider variant of examples/platform: a
merge request gets validate, a saved plan and one note; its next push edits that note (PUT);
a merge request that a policy denies gets its note and a failed pipeline; a merge whose
reviewed plan is still fresh applies exactly it; a stale one shows the difference and
waits for the manual job; a scheduled pipeline runs drift and opens one issue, which the
next drift edits and, after an admin's own drift run in between, the run that finds no
drift left closes.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.ci import gitlab_api
from tests.ci.gitlab_runner import Pipeline, Runner
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
REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "ci" / "gitlab" / ".gitlab-ci.yml"
DEVELOPMENT_TRAINFORM = REPO / ".venv" / "bin" / "trainform"
MARKER = "<!-- trainform-review -->"


class Project:
    """The repository, the API stand-in and the runner, for one test."""

    def __init__(self, tmp_path: Path, venv: Path, api: gitlab_api.Forge, url: str) -> None:
        self.origin, self.live = tmp_path / "origin", tmp_path / "live"
        self.api, self.url = api, url
        make_origin(self.origin, self.live, DEVELOPMENT_TRAINFORM)
        bin_ = write_standin_bin(tmp_path / "bin")
        path = os.pathsep.join([str(bin_), str(venv / "bin"), "/usr/bin", "/bin"])
        config = YAML(typ="safe").load(CONFIG.read_text(encoding="utf-8"))
        self.runner = Runner(config, self.origin, tmp_path / "build" / "repo", api.artifacts, path)
        self.next_pipeline = 1

    def variables(self, source: str, sha: str, **extra: str) -> dict[str, str]:
        return {
            "CI_PIPELINE_SOURCE": source, "CI_COMMIT_SHA": sha, "CI_DEFAULT_BRANCH": "main",
            "CI_API_V4_URL": self.url, "CI_PROJECT_ID": gitlab_api.PROJECT,
            "TRAINFORM_BOT_TOKEN": gitlab_api.TOKEN,
            "TRAINFORM_PLAN_KEY": "a-test-signing-key",
            **extra,
        }

    def pipeline(self, variables: dict[str, str]) -> Pipeline:
        pipeline = Pipeline(self.next_pipeline)
        self.next_pipeline += 1
        self.runner.run_pipeline(pipeline, variables)
        self.api.pipelines[pipeline.id] = [
            {"id": job.id, "name": job.name, "status": job.status}
            for job in pipeline.jobs.values()
        ]
        return pipeline

    def merge_request(self, iid: int, head: str) -> Pipeline:
        base = git(self.origin, "rev-parse", "main")
        pipeline = self.pipeline(self.variables(
            "merge_request_event", head, CI_MERGE_REQUEST_IID=str(iid),
            CI_MERGE_REQUEST_DIFF_BASE_SHA=base,
        ))
        self.api.merge_requests = [m for m in self.api.merge_requests if m["iid"] != iid] + [
            {"iid": iid, "sha": head, "merge_commit_sha": None,
             "head_pipeline": {"id": pipeline.id}}
        ]
        return pipeline

    def merged(self, iid: int, branch: str) -> Pipeline:
        sha = merge(self.origin, branch)
        next(m for m in self.api.merge_requests if m["iid"] == iid)["merge_commit_sha"] = sha
        return self.pipeline(self.variables("push", sha, CI_COMMIT_BRANCH="main"))

    def scheduled(self) -> Pipeline:
        sha = git(self.origin, "rev-parse", "main")
        return self.pipeline(self.variables("schedule", sha, CI_COMMIT_BRANCH="main"))


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[gitlab_api.Forge, str]]:
    forge = gitlab_api.Forge(artifacts=tmp_path / "artifacts")
    server, url = gitlab_api.serve(forge)
    yield forge, url
    server.shutdown()
    server.server_close()


def notes(project: Project, iid: int) -> list[dict[str, Any]]:
    return project.api.notes.get(iid, [])


def statuses(pipeline: Pipeline) -> dict[str, str]:
    return {name: job.status for name, job in pipeline.jobs.items()}


def test_merge_requests_merges_and_drift_on_gitlab(
    tmp_path: Path, clean_python: Path, api: tuple[gitlab_api.Forge, str]
) -> None:
    project = Project(tmp_path, clean_python, *api)
    debug = (project.origin / "teams/eval-team/quotas.yaml").read_text(encoding="utf-8")

    # A merge request: validate, a saved plan, one note.
    first = commit_change(project.origin, "more-debug-jobs", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: 6"),
    })
    # Someone else's note that starts with the marker is never the one to edit.
    spoof = {"id": 1, "body": MARKER + "\nfake", "author": {"username": "mallory"}}
    api[0].notes[1] = [dict(spoof)]
    pipeline = project.merge_request(1, first)
    assert statuses(pipeline) == {
        "trainform": "success", "validate": "success", "plan": "success",
        "review": "success", "apply": "skipped", "apply-replanned": "skipped",
        "drift": "skipped",
    }, pipeline.jobs["review"].log
    assert "are valid" in pipeline.jobs["validate"].log
    saved = api[0].artifacts / str(pipeline.jobs["plan"].id)
    assert (saved / "plan.code").read_text().strip() == "2"
    assert json.loads((saved / "plan.tfplan").read_text())["signature"].startswith("hmac")
    spoofed, note = notes(project, 1)
    assert spoofed == spoof
    assert note["body"].startswith(MARKER) and "runningJobs" in note["body"]

    # The next push edits that note (PUT): still one.
    second = commit_change(project.origin, "more-debug-jobs", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: 6")
        .replace("maxWallTime: 2h", "maxWallTime: 3h"),
    })
    pipeline = project.merge_request(1, second)
    assert pipeline.jobs["review"].status == "success", pipeline.jobs["review"].log
    spoofed, edited = notes(project, 1)
    assert spoofed == spoof
    assert edited["id"] == note["id"] and "3h" in edited["body"]
    assert [r[0] for r in api[0].requests if "/notes" in r[1]][-2:] == ["GET", "PUT"]

    # A policy denial: validate fails, the note is posted all the same, review fails.
    # The branch also plants files under every trusted path (policies that would allow
    # it, a CODEOWNERS naming @mallory, a wheel and a .pth): none is read or installed.
    sentinel = tmp_path / "planted-code-ran"
    denied = commit_change(project.origin, "own-queue", "main", {
        "teams/eval-team/queue.yaml": "apiVersion: trainform/v1\nkind: Queue\n"
        "metadata: {name: eval-private}\nspec:\n  pools:\n"
        "    - pool: a100\n      nominalQuota: {gpu: 1}\n",
        **planted_files(sentinel),
    })
    pipeline = project.merge_request(2, denied)
    assert statuses(pipeline)["validate"] == "failed"
    assert statuses(pipeline)["plan"] == "success"
    assert statuses(pipeline)["review"] == "failed"
    (denial,) = notes(project, 2)
    assert "**Plan:** a policy denies this change (exit code 3)" in denial["body"]
    assert denial["body"].count(MARKER) == 1
    assert "Queue/eval-private" in denial["body"] and "project-isolation" in denial["body"]
    assert "@eval-leads" in denial["body"] and "@mallory" not in denial["body"]
    assert not sentinel.exists() and installed_plants(clean_python) == []

    # A plan that errors: the note says so in words, with what failed at file:line.
    broken = commit_change(project.origin, "broken-quota", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: many"),
    })
    pipeline = project.merge_request(4, broken)
    assert statuses(pipeline)["plan"] == "success" and statuses(pipeline)["review"] == "failed"
    (failure,) = notes(project, 4)
    assert failure["body"].count(MARKER) == 1
    assert "the plan failed: nothing can be applied (exit code 1)" in failure["body"]
    assert "#### The plan failed" in failure["body"]
    assert "teams/eval-team/quotas.yaml:" in failure["body"], failure["body"]

    # Another merge request, reviewed while the first is open.
    other = commit_change(project.origin, "finetune-wall-time", "main", {
        "teams/alignment/quotas.yaml": (project.origin / "teams/alignment/quotas.yaml")
        .read_text(encoding="utf-8").replace("maxWallTime: 2h", "maxWallTime: 90m"),
    })
    assert project.merge_request(3, other).jobs["review"].status == "success"

    # Merge of the first: the reviewed plan is fresh and applied; nothing waits.
    # The plan job of the MR's head pipeline (its second push), not of the first push.
    reviewed_plan_job = next(j for j in project.api.pipelines[2] if j["name"] == "plan")
    pipeline = project.merged(1, "more-debug-jobs")
    fetched = f"/api/v4/projects/42/jobs/{reviewed_plan_job['id']}/artifacts/plan.tfplan"
    assert ("GET", fetched, {}) in api[0].requests
    assert statuses(pipeline)["apply"] == "success", pipeline.jobs["apply"].log
    assert statuses(pipeline)["apply-replanned"] == "manual"
    assert "Apply complete" in pipeline.jobs["apply"].log
    assert "stale" not in pipeline.jobs["apply"].log
    assert limits(project.live, "eval-team/hpc-debug")["maxWallTime"] == "3h"
    applied = notes(project, 1)[-1]["body"]
    assert "after the merge: applied the reviewed plan" in applied
    assert f"jobs/{pipeline.jobs['apply'].id}" in applied

    # Merge of the other: stale; the difference is shown and the manual job waits.
    pipeline = project.merged(3, "finetune-wall-time")
    log = pipeline.jobs["apply"].log
    assert statuses(pipeline)["apply"] == "success", log
    assert "The reviewed plan is stale" in log and "--- reviewed.txt" in log
    assert "Apply complete" not in log
    assert limits(project.live, "alignment/hpc-debug")["maxWallTime"] == "2h"
    assert "after the merge: skipped: the reviewed plan is stale" in notes(project, 3)[-1]["body"]
    assert statuses(pipeline)["apply-replanned"] == "manual"
    # Someone allowed to deploy reads the difference and starts the manual job.
    approved = project.runner.start_manual(pipeline, "apply-replanned", project.variables(
        "push", git(project.origin, "rev-parse", "main"), CI_COMMIT_BRANCH="main"))
    assert approved.status == "success" and "Apply complete" in approved.log, approved.log
    assert limits(project.live, "alignment/hpc-debug")["maxWallTime"] == "1h30m"

    # Scheduled drift: nothing drifted, no issue; a hand change opens one, the next edits it.
    pipeline = project.scheduled()
    assert statuses(pipeline)["drift"] == "success", pipeline.jobs["drift"].log
    assert api[0].issues == []
    rows = live_rows(project.live)
    hand_edit(project.live, "Queue/pretrain", "defaultPriority", 1001)
    pipeline = project.scheduled()
    assert statuses(pipeline)["drift"] == "success", pipeline.jobs["drift"].log
    report = api[0].artifacts / str(pipeline.jobs["drift"].id) / "drift.html"
    assert "<html" in report.read_text()
    (issue,) = api[0].issues
    assert issue["description"].startswith("<!-- trainform-drift env=prod -->")
    hand_edit(project.live, "Queue/finetune", "defaultPriority", 501)
    project.scheduled()
    (edited_issue,) = api[0].issues
    assert edited_issue["iid"] == issue["iid"]
    assert api[0].requests[-1][:2] == ("PUT", f"/api/v4/projects/42/issues/{issue['iid']}")
    # An admin's own drift run in between changes nothing for the schedule: once the drift
    # is undone, the next scheduled run closes the issue with a note.
    admin = tmp_path / "admin"
    git(tmp_path, "clone", "-q", str(project.origin), str(admin))
    manual = subprocess.run(
        [str(DEVELOPMENT_TRAINFORM), "drift", str(admin), "--env", "prod"],
        capture_output=True, text=True, check=False,
    )
    assert manual.returncode == 2, manual.stderr
    restore_rows(project.live, rows)
    pipeline = project.scheduled()
    assert statuses(pipeline)["drift"] == "success", pipeline.jobs["drift"].log
    (closed,) = api[0].issues
    assert closed["iid"] == issue["iid"] and closed["state"] == "closed"
    assert "No open drift in `prod`" in closed["notes"][-1]["body"]
