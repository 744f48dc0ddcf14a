"""The GitHub Actions example (examples/ci/github: trainform's composite action, vendored)
run job by job, step by step, as written.

A temporary forge repository holds a local-provider variant of examples/platform with
staging and prod (tests/ci/platform_repo.py); `gh` is a stand-in that records what would be
posted. One story, in order, on one platform: a pull request gets validate, saved plans and
one comment; its next push edits that comment; a fork's pull request gets only a comment
saying what is not run; a pull request that a policy denies gets its comment and a failed
check; a merge whose reviewed plans are still fresh applies exactly them, staging then prod,
each outcome posted; a merge whose reviewed plans went stale shows the difference and waits
for staging's approval, prod for staging, then prod's approval; a schedule runs drift and
opens one issue, which the next drift edits and a clean run closes.
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

    def __init__(
        self, tmp_path: Path, venv: Path, monkeypatch: pytest.MonkeyPatch, template: Path,
        install: str = "vendored", trainform: Path | None = None,
        workflow: dict[str, Any] | None = None,
    ) -> None:
        """`install` and `trainform` as tests.ci.platform_repo.make_origin takes them;
        `workflow` instead of the example's (an install option's variant of it)."""
        self.origin, self.live = tmp_path / "origin", tmp_path / "live"
        self.store = tmp_path / "artifacts"
        self.records = tmp_path / "gh.json"
        self.records.write_text(json.dumps(
            {"calls": [], "comments": [], "issues": [], "pulls": [], "open": [], "runs": [],
             "artifacts": str(self.store)}
        ))
        bin_ = write_standin_bin(tmp_path / "bin")
        path = os.pathsep.join([str(STANDINS), str(bin_), str(venv / "bin"), "/usr/bin", "/bin"])
        make_origin(self.origin, self.live, template, install, trainform)
        workflow = workflow or YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
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
            "github.event.pull_request.head.repo.full_name": extra.pop("head_repo", ""),
            **{f"secrets.{name}": f"{name.lower()}-value" for name in SECRETS},
            "secrets.TRAINFORM_PLAN_KEY": KEY,
            **extra,
        }

    def pipeline(
        self, context: dict[str, str], jobs: list[str], approved: tuple[str, ...] = (),
        run: tuple[str, dict[str, JobResult]] | None = None,
    ) -> dict[str, JobResult]:
        """Run `jobs` in order (the order of their `needs`); a job whose `needs` failed or
        were skipped is skipped as GitHub does, unless its `if:` says `!cancelled()`; a job
        in an `*-approval` environment waits (is not run) unless `approved`. `run` continues
        an earlier run (its id and results), as approving a waiting deployment does."""
        if run is None:
            run = (str(self.next_run), {})
            self.next_run += 1
            if context["github.event_name"] == "pull_request":
                state = self.state()
                state["runs"].append({"id": run[0], "head_sha": context["github.sha"],
                                      "event": "pull_request"})
                self.save(state)
        run_id, results = run
        workflow_jobs = self.runner.workflow["jobs"]
        for name in jobs:
            job = workflow_jobs[name]
            needs = [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", [])
            for need in needs:
                done = results.get(need, JobResult(need, ran=False))
                result = "failure" if done.failed else "success" if done.ran else "skipped"
                context[f"needs.{need}.result"] = result
                for key in workflow_jobs[need].get("outputs", {}):
                    context[f"needs.{need}.outputs.{key}"] = done.outputs.get(key, "")
            waiting = str(job.get("environment", "")).endswith("-approval")
            blocked = any(context[f"needs.{n}.result"] != "success" for n in needs)
            if (waiting and name not in approved) or (
                blocked and "!cancelled()" not in job.get("if", "")
            ):
                results[name] = JobResult(name, ran=False)
                continue
            results[name] = self.runner.run_job(name, dict(context), run_id)
        return results

    def pull_request(
        self, number: int, head: str, head_repo: str = REPOSITORY
    ) -> dict[str, JobResult]:
        """The runs a pull request's push starts: `pull_request` (the branch's workflow)
        and `pull_request_target` (the base's, for the fork job only)."""
        base = git(self.origin, "rev-parse", "main")
        state = self.state()
        state["open"] = [p for p in state["open"] if p["number"] != number]
        state["open"].append({"number": number, "head": head})
        self.save(state)
        context = self.context("pull_request", head, f"refs/pull/{number}/merge",
                               number=str(number), base=base, head=head, head_repo=head_repo)
        results = self.pipeline(context, ["fork", "plan", "comment", *MERGE_JOBS, "drift"])
        target = {**context, "github.event_name": "pull_request_target"}
        results["fork"] = self.runner.run_job("fork", target, f"{self.next_run - 1}-target")
        return results

    def merged(self, number: int, head: str, branch: str) -> tuple[str, dict[str, JobResult]]:
        """The push run of a merge: its id and results (approval jobs wait)."""
        sha = merge(self.origin, branch)
        state = self.state()
        state["pulls"].append({"number": number, "merge_commit_sha": sha, "head": {"sha": head}})
        state["open"] = [p for p in state["open"] if p["number"] != number]
        self.save(state)
        run_id = str(self.next_run)
        return run_id, self.pipeline(self.push_context(), ["plan", *MERGE_JOBS])

    def approve(self, run: tuple[str, dict[str, JobResult]], job: str) -> dict[str, JobResult]:
        """A reviewer approves `job`'s deployment: it runs, then the jobs after it."""
        after = MERGE_JOBS[MERGE_JOBS.index(job):]
        return self.pipeline(self.push_context(), after, approved=(job,), run=run)

    def push_context(self) -> dict[str, str]:
        return self.context("push", git(self.origin, "rev-parse", "main"), "refs/heads/main")

    def scheduled(self) -> dict[str, JobResult]:
        sha = git(self.origin, "rev-parse", "main")
        return self.pipeline(self.context("schedule", sha, "refs/heads/main"), ["drift"])


MERGE_JOBS = ["staging", "staging-approved", "prod", "prod-approved"]
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
    tmp_path: Path, clean_python: Path, monkeypatch: pytest.MonkeyPatch, origin_template: Path
) -> None:
    forge = Forge(tmp_path, clean_python, monkeypatch, origin_template)
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
    assert "staging: validate exited 0, plan exited 2, review exited 0" in plan.log
    assert "prod: validate exited 0, plan exited 2, review exited 0" in plan.log
    reviewed = forge.store / "1" / "trainform-plan"
    assert sorted(p.name for p in reviewed.iterdir()) == sorted(
        ["codes"] + [f"{kind}-{env}.{suffix}" for env in ("staging", "prod")
                     for kind, suffix in (("plan", "err"), ("plan", "md"), ("plan", "tfplan"),
                                          ("review", "md"), ("validate", "txt"))]
    )
    for env in ("staging", "prod"):
        saved = json.loads((reviewed / f"plan-{env}.tfplan").read_text())
        assert saved["signature"].startswith("hmac") and saved["environment"] == env
    assert not results["comment"].failed, results["comment"].log
    assert not any(results[job].ran for job in ("fork", *MERGE_JOBS, "drift"))
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

    # A pull request from a fork: nothing runs on the branch's event (no red checks), and
    # the base's pull_request_target job says in the one comment what is not run and why.
    forked = commit_change(forge.origin, "fork-change", "main", {
        "teams/eval-team/quotas.yaml": debug.replace("runningJobs: 4", "runningJobs: 9"),
    })
    results = forge.pull_request(5, forked, head_repo="mallory/specs")
    assert [name for name, job in results.items() if job.ran] == ["fork"]
    assert not results["fork"].failed, results["fork"].log
    (fork_comment,) = review_comments(forge, 5)
    assert fork_comment["body"].startswith(MARKER)
    assert "did not validate, plan or review" in fork_comment["body"]
    assert "`mallory/specs`" in fork_comment["body"] and "read-only token" in fork_comment["body"]

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
    assert not results["plan"].failed
    assert "prod: validate exited 1, plan exited 3" in results["plan"].log
    comment_job = results["comment"]
    assert comment_job.failed and "failed: staging prod" in comment_job.log
    (denial,) = review_comments(forge, 2)
    assert "**`staging`** validate: invalid (exit code 1); plan: a policy denies this change " \
        "(exit code 3)" in denial["body"]
    assert "**`prod`** validate: invalid (exit code 1); plan: a policy denies" in denial["body"]
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
    # And one that makes the same change as that one, and another: it does not commute.
    overlapping = commit_change(forge.origin, "alignment-batch-jobs", "main", {
        "teams/alignment/quotas.yaml": quotas(forge, "alignment").replace(
            "maxWallTime: 2h", "maxWallTime: 90m").replace("runningJobs: 10", "runningJobs: 12"),
    })
    assert not forge.pull_request(6, overlapping)["comment"].failed
    # Its comment names the earlier open pull request that changes the same Quota (the
    # lock, as advice); the first's did not name the second, opened after it.
    lock = review_comments(forge, 6)[0]["body"]
    assert "#### Held by other pull requests" in lock
    assert "#3" in lock and "Quota/alignment/hpc-debug" in lock, lock
    assert "Held by other" not in review_comments(forge, 3)[0]["body"]

    # Merge of the first: staging, then prod; each environment's reviewed plan is still
    # what main plans, and is applied; the outcome is posted to the pull request.
    run, results = forge.merged(1, second, "more-debug-jobs")
    for env in ("staging", "prod"):
        assert not results[env].failed, results[env].log
        assert results[env].outputs == {"applied": "true"}
        assert "is fresh" in results[env].log and "Apply complete" in results[env].log
        assert limits(forge.live, "eval-team/hpc-debug", env) == {
            "gpu": "4", "runningJobs": 6, "maxWallTime": "3h"}
    assert not results["staging-approved"].ran and not results["prod-approved"].ran
    # The artifact of the run at the PR's last head, not the first push's.
    head_run = next(r["id"] for r in forge.state()["runs"] if r["head_sha"] == second)
    downloads = [c[:5] for c in forge.state()["calls"]
                 if c[:2] == ["run", "download"] and c[-1] == "reviewed"]
    assert downloads == [["run", "download", head_run, "--name", "trainform-plan"]] * 2
    staging_outcome, prod_outcome = (c["body"] for c in review_comments(forge, 1)[-2:])
    assert staging_outcome.startswith("<!-- trainform-apply -->")
    assert "of `staging` after the merge: applied the reviewed plan." in staging_outcome
    assert "of `prod` after the merge: applied the reviewed plan." in prod_outcome
    assert prod_outcome.endswith(f"/actions/runs/{run}\n")

    # Merge of the other: its plans were made before the first was applied, so they are
    # stale, but the changes commute: main's plan makes the same ones, and both
    # environments apply it without an approval.
    run, results = forge.merged(3, other, "finetune-wall-time")
    for env in ("staging", "prod"):
        assert results[env].outputs == {"applied": "true"}, results[env].log
        assert "is stale, and the fresh plan makes the same changes" in results[env].log
        assert limits(forge.live, "alignment/hpc-debug", env)["maxWallTime"] == "1h30m"
    assert not results["staging-approved"].ran and not results["prod-approved"].ran
    assert [c["body"].split(" after the merge: ")[1][:40] for c in review_comments(forge, 3)[-2:]
            ] == ["applied the reviewed changes through a p"] * 2

    # Merge of the overlapping one: part of its change is already applied, so main's plan
    # differs. Staging shows the difference and waits for its approval; prod waits for
    # staging; once staging's approved plan is applied, prod does the same.
    run, results = forge.merged(6, overlapping, "alignment-batch-jobs")
    staging = results["staging"]
    assert not staging.failed and staging.outputs == {"applied": "false"}, staging.log
    assert "Apply complete" not in staging.log
    assert not any(results[job].ran for job in ("staging-approved", "prod", "prod-approved"))
    skipped = review_comments(forge, 6)[-1]["body"]
    assert "of `staging` after the merge: skipped: main's plan differs" in skipped
    assert "Quota/alignment/hpc-debug" in skipped, skipped
    assert limits(forge.live, "alignment/hpc-batch", "staging")["runningJobs"] == 10
    results = forge.approve((run, results), "staging-approved")
    assert not results["staging-approved"].failed, results["staging-approved"].log
    assert limits(forge.live, "alignment/hpc-batch", "staging")["runningJobs"] == 12
    assert not results["prod"].failed and results["prod"].outputs == {"applied": "false"}
    assert limits(forge.live, "alignment/hpc-batch", "prod")["runningJobs"] == 10
    results = forge.approve((run, results), "prod-approved")
    assert not results["prod-approved"].failed, results["prod-approved"].log
    assert limits(forge.live, "alignment/hpc-batch", "prod")["runningJobs"] == 12
    outcomes = [c["body"].split("`")[1] + ": " + c["body"].split(" after the merge: ")[1][:26]
                for c in review_comments(forge, 6)[-4:]]
    assert outcomes == [
        "staging: skipped: main's plan diffe", "staging: applied main's plan after ",
        "prod: skipped: main's plan diffe", "prod: applied main's plan after ",
    ]

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
    assert "<html" in (forge.store / drift_run / "drift-report" / "drift-prod.html").read_text()
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
