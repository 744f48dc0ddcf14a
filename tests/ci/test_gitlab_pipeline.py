"""The GitLab CI example (examples/ci/gitlab: trainform's component, vendored) run job by
job, as written, against a stand-in of GitLab's API (tests/ci/gitlab_api.py) that records
what would be posted.

The same story as the GitHub test, on a local-provider variant of examples/platform with
staging and prod: a merge request gets validate, saved plans and one note; its next push
edits that note (PUT); a fork's merge request gets only the note saying what is not run; a
merge request that a policy denies, and one whose plan errors, get their note and a failed
pipeline; a merge whose reviewed plans are still fresh applies exactly them, staging then
prod, each outcome posted; a stale one shows the difference and waits for approve-staging,
and prod refuses until staging has applied; a scheduled pipeline runs drift and opens one
issue, which the next drift edits and, after an admin's own drift run in between, the run
that finds no drift left closes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.ci import gitlab_api
from tests.ci.gitlab_runner import Pipeline, Runner, load_config
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

    def __init__(
        self, tmp_path: Path, venv: Path, api: tuple[gitlab_api.Forge, str], template: Path,
        install: str = "vendored", trainform: Path | None = None, config: Path = CONFIG,
    ) -> None:
        """`install` and `trainform` as tests.ci.platform_repo.make_origin takes them;
        `config` instead of the example's `.gitlab-ci.yml` (an install option's)."""
        self.origin, self.live = tmp_path / "origin", tmp_path / "live"
        self.api, self.url = api
        make_origin(self.origin, self.live, template, install, trainform)
        bin_ = write_standin_bin(tmp_path / "bin")
        path = os.pathsep.join([str(bin_), str(venv / "bin"), "/usr/bin", "/bin"])
        config = load_config(config, self.origin, REPO / "templates")
        self.runner = Runner(
            config, self.origin, tmp_path / "build" / "repo", self.api.artifacts, path
        )
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

    def merge_request(self, iid: int, head: str, source: str = gitlab_api.PROJECT) -> Pipeline:
        """A merge request's pipeline; `source` is the project its branch is in."""
        base = git(self.origin, "rev-parse", "main")
        pipeline = self.pipeline(self.variables(
            "merge_request_event", head, CI_MERGE_REQUEST_IID=str(iid),
            CI_MERGE_REQUEST_DIFF_BASE_SHA=base, CI_MERGE_REQUEST_PROJECT_ID=gitlab_api.PROJECT,
            CI_MERGE_REQUEST_SOURCE_PROJECT_ID=source,
            CI_MERGE_REQUEST_SOURCE_PROJECT_PATH=f"project-{source}/specs",
        ))
        self.api.merge_requests = [m for m in self.api.merge_requests if m["iid"] != iid] + [
            {"iid": iid, "sha": head, "merge_commit_sha": None, "state": "opened",
             "head_pipeline": {"id": pipeline.id}}
        ]
        return pipeline

    def merged(self, iid: int, branch: str) -> Pipeline:
        sha = merge(self.origin, branch)
        merged_request = next(m for m in self.api.merge_requests if m["iid"] == iid)
        merged_request.update(merge_commit_sha=sha, state="merged")
        return self.pipeline(self.variables("push", sha, CI_COMMIT_BRANCH="main"))

    def scheduled(self) -> Pipeline:
        sha = git(self.origin, "rev-parse", "main")
        return self.pipeline(self.variables("schedule", sha, CI_COMMIT_BRANCH="main"))


def notes(project: Project, iid: int) -> list[dict[str, Any]]:
    return project.api.notes.get(iid, [])


def statuses(pipeline: Pipeline) -> dict[str, str]:
    return {name: job.status for name, job in pipeline.jobs.items()}


def test_merge_requests_merges_and_drift_on_gitlab(
    tmp_path: Path, clean_python: Path, api: tuple[gitlab_api.Forge, str], origin_template: Path
) -> None:
    project = Project(tmp_path, clean_python, api, origin_template)
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
        "trainform": "success", "trainform-fork": "skipped", "trainform-plan": "success",
        "trainform-review": "success", "apply-staging": "skipped",
        "approve-staging": "skipped", "apply-prod": "skipped", "approve-prod": "skipped",
        "trainform-drift": "skipped",
    }, pipeline.jobs["trainform-review"].log
    assert "are valid" in pipeline.jobs["trainform-plan"].log
    saved = api[0].artifacts / str(pipeline.jobs["trainform-plan"].id)
    for env in ("staging", "prod"):
        assert (saved / "codes" / env).read_text().split() == ["0", "2"]
        plan = json.loads((saved / f"plan-{env}.tfplan").read_text())
        assert plan["signature"].startswith("hmac") and plan["environment"] == env
    spoofed, note = notes(project, 1)
    assert spoofed == spoof
    assert note["body"].startswith(MARKER) and "runningJobs" in note["body"]

    # The next push edits that note (PUT): still one.
    second = commit_change(project.origin, "more-debug-jobs", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: 6")
        .replace("maxWallTime: 2h", "maxWallTime: 3h"),
    })
    pipeline = project.merge_request(1, second)
    assert statuses(pipeline)["trainform-review"] == "success", pipeline.jobs[
        "trainform-review"].log
    spoofed, edited = notes(project, 1)
    assert spoofed == spoof
    assert edited["id"] == note["id"] and "3h" in edited["body"]
    assert [r[0] for r in api[0].requests if "/notes" in r[1]][-2:] == ["GET", "PUT"]

    # A merge request from a fork: nothing is built, planned or reviewed; the fork job
    # says in the one note what is not run and why.
    forked = commit_change(project.origin, "fork-change", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: 9"),
    })
    pipeline = project.merge_request(5, forked, source="77")
    assert {n for n, s in statuses(pipeline).items() if s != "skipped"} == {"trainform-fork"}
    assert statuses(pipeline)["trainform-fork"] == "success", pipeline.jobs["trainform-fork"].log
    (fork_note,) = notes(project, 5)
    assert fork_note["body"].startswith(MARKER)
    assert "did not validate, plan or review" in fork_note["body"]
    assert "`project-77/specs`" in fork_note["body"]

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
    assert statuses(pipeline)["trainform-plan"] == "success"
    assert statuses(pipeline)["trainform-review"] == "failed"
    assert "failed: staging prod" in pipeline.jobs["trainform-review"].log
    (denial,) = notes(project, 2)
    assert "**`prod`** validate: invalid (exit code 1); plan: a policy denies this change " \
        "(exit code 3)" in denial["body"]
    assert denial["body"].count(MARKER) == 1
    assert "Queue/eval-private" in denial["body"] and "project-isolation" in denial["body"]
    assert "@eval-leads" in denial["body"] and "@mallory" not in denial["body"]
    assert not sentinel.exists() and installed_plants(clean_python) == []

    # A plan that errors: the note says so in words, with what failed at file:line.
    broken = commit_change(project.origin, "broken-quota", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: many"),
    })
    pipeline = project.merge_request(4, broken)
    assert statuses(pipeline)["trainform-plan"] == "success"
    assert statuses(pipeline)["trainform-review"] == "failed"
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
    assert project.merge_request(3, other).jobs["trainform-review"].status == "success"
    # And one that makes the same change as that one, and another: it does not commute.
    alignment = (project.origin / "teams/alignment/quotas.yaml").read_text(encoding="utf-8")
    overlapping = commit_change(project.origin, "alignment-batch-jobs", "main", {
        "teams/alignment/quotas.yaml": alignment.replace("maxWallTime: 2h", "maxWallTime: 90m")
        .replace("runningJobs: 10", "runningJobs: 12"),
    })
    assert project.merge_request(6, overlapping).jobs["trainform-review"].status == "success"
    # Its note names the earlier open merge request that changes the same Quota (the lock,
    # as advice); the earlier one's does not name the later.
    lock = notes(project, 6)[0]["body"]
    assert "#### Held by other merge requests" in lock
    assert "!3" in lock and "Quota/alignment/hpc-debug" in lock, lock
    assert "Held by other" not in notes(project, 3)[0]["body"]

    # Merge of the first: staging, then prod; each reviewed plan is fresh and applied
    # (the plan job of the MR's head pipeline, its second push, not the first); nothing
    # waits; each outcome is posted to the merge request.
    reviewed_plan_job = next(j for j in project.api.pipelines[2] if j["name"] == "trainform-plan")
    pipeline = project.merged(1, "more-debug-jobs")
    for env in ("staging", "prod"):
        fetched = f"/api/v4/projects/42/jobs/{reviewed_plan_job['id']}/artifacts/plan-{env}.tfplan"
        assert ("GET", fetched, {}) in api[0].requests
        job = pipeline.jobs[f"apply-{env}"]
        assert job.status == "success", job.log
        assert "Apply complete" in job.log and "stale" not in job.log
        assert statuses(pipeline)[f"approve-{env}"] == "manual"
        assert limits(project.live, "eval-team/hpc-debug", env)["maxWallTime"] == "3h"
    staging_note, prod_note = (n["body"] for n in notes(project, 1)[-2:])
    assert "of `staging` after the merge: applied the reviewed plan" in staging_note
    assert "of `prod` after the merge: applied the reviewed plan" in prod_note
    assert f"jobs/{pipeline.jobs['apply-prod'].id}" in prod_note

    # Merge of the other: its plans are stale (the first was applied since), but the
    # changes commute: main's plan makes the same ones and both environments apply it.
    pipeline = project.merged(3, "finetune-wall-time")
    for env in ("staging", "prod"):
        log = pipeline.jobs[f"apply-{env}"].log
        assert pipeline.jobs[f"apply-{env}"].status == "success", log
        assert "is stale, and the fresh plan makes the same changes" in log
        assert limits(project.live, "alignment/hpc-debug", env)["maxWallTime"] == "1h30m"
    assert [n["body"].split(" after the merge: ")[1][:40] for n in notes(project, 3)[-2:]] == [
        "applied the reviewed changes through a p"] * 2

    # Merge of the overlapping one: part of its change is already applied, so main's plan
    # differs: nothing is applied to staging, the difference is in the note and
    # approve-staging waits; prod does not apply while staging has changes left (its job
    # fails, saying to approve staging first); once staging's approved plan is applied,
    # prod's retry finds main's plan differing too, and approve-prod applies it.
    pipeline = project.merged(6, "alignment-batch-jobs")
    log = pipeline.jobs["apply-staging"].log
    assert statuses(pipeline)["apply-staging"] == "success", log
    assert "The reviewed plan of staging was not applied" in log and "Apply complete" not in log
    skipped = notes(project, 6)[-1]["body"]
    assert "of `staging` after the merge: skipped: main's plan differs" in skipped
    assert "Quota/alignment/hpc-debug" in skipped, skipped
    prod = pipeline.jobs["apply-prod"]
    assert prod.status == "failed" and "staging has not applied main cleanly yet" in prod.log
    assert limits(project.live, "alignment/hpc-batch", "prod")["runningJobs"] == 10
    push = project.variables("push", git(project.origin, "rev-parse", "main"),
                             CI_COMMIT_BRANCH="main")
    approved = project.runner.start_manual(pipeline, "approve-staging", push)
    assert approved.status == "success" and "Apply complete" in approved.log, approved.log
    assert limits(project.live, "alignment/hpc-batch", "staging")["runningJobs"] == 12
    prod = project.runner.retry(pipeline, "apply-prod", push)
    assert prod.status == "success" and "The reviewed plan of prod was not applied" in prod.log
    approved = project.runner.start_manual(pipeline, "approve-prod", push)
    assert approved.status == "success" and "Apply complete" in approved.log, approved.log
    assert limits(project.live, "alignment/hpc-batch", "prod")["runningJobs"] == 12
    outcomes = [n["body"].split("`")[1] + ": " + n["body"].split(" after the merge: ")[1][:26]
                for n in notes(project, 6)[-4:]]
    assert outcomes == [
        "staging: skipped: main's plan diffe", "staging: applied main's plan after ",
        "prod: skipped: main's plan diffe", "prod: applied main's plan after ",
    ]
    assert f"jobs/{approved.id}" in notes(project, 6)[-1]["body"]

    # Scheduled drift: nothing drifted, no issue; a hand change opens one, the next edits it.
    pipeline = project.scheduled()
    assert statuses(pipeline)["trainform-drift"] == "success", pipeline.jobs[
        "trainform-drift"].log
    assert api[0].issues == []
    rows = live_rows(project.live)
    hand_edit(project.live, "Queue/pretrain", "defaultPriority", 1001)
    pipeline = project.scheduled()
    assert statuses(pipeline)["trainform-drift"] == "success", pipeline.jobs[
        "trainform-drift"].log
    report = api[0].artifacts / str(pipeline.jobs["trainform-drift"].id) / "drift-prod.html"
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
    assert statuses(pipeline)["trainform-drift"] == "success", pipeline.jobs[
        "trainform-drift"].log
    (closed,) = api[0].issues
    assert closed["iid"] == issue["iid"] and closed["state"] == "closed"
    assert "No open drift in `prod`" in closed["notes"][-1]["body"]
