"""The ways a spec repository installs trainform, each run on both CI systems: a submodule
at `tools/trainform` pinned to a commit of trainform's repository, and a wheel committed at
`tools/` (the vendored copy is what tests/ci/test_github_pipeline.py and
test_gitlab_pipeline.py run). Each is the example changed as examples/ci/README.md says,
and one pull request's validate, plan and review of prod, from its base commit's trainform.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.ci import gitlab_api
from tests.ci.platform_repo import commit_change
from tests.ci.test_github_pipeline import WORKFLOW, Forge
from tests.ci.test_gitlab_pipeline import Project

pytestmark = pytest.mark.slow  # about 20 s each: one pull request's pipeline

CHANGE = ("teams/eval-team/quotas.yaml", "runningJobs: 4", "runningJobs: 6")


def github_workflow(install: str, wheel: str) -> dict[str, Any]:
    """The example workflow for `install`: as written for a submodule (its checkouts fetch
    submodules); for a wheel, the action from trainform's repository at a tag and the wheel
    as `install`. Prod only."""
    workflow = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "/ci/github" not in step.get("uses", ""):
                continue
            step["with"]["environments"] = "prod"
            if install == "wheel":
                step["uses"] = "ml-platform/trainform/ci/github@v0.1.0"
                step["with"]["install"] = f"tools/{wheel}"
    return workflow


def changed(origin: Path) -> str:
    path, old, new = CHANGE
    text = (origin / path).read_text(encoding="utf-8")
    return commit_change(origin, "more-debug-jobs", "main", {path: text.replace(old, new)})


@pytest.mark.parametrize("install", ["submodule", "wheel"])
def test_github_pull_request_with_trainform_as(
    install: str, tmp_path: Path, clean_python: Path, monkeypatch: pytest.MonkeyPatch,
    origin_template: Path, trainform_wheel: Path, trainform_repository: Path,
) -> None:
    source = trainform_wheel if install == "wheel" else trainform_repository
    forge = Forge(tmp_path, clean_python, monkeypatch, origin_template, install, source,
                  github_workflow(install, trainform_wheel.name))
    results = forge.pull_request(1, changed(forge.origin))
    assert not results["plan"].failed, results["plan"].log
    assert "prod: validate exited 0, plan exited 2, review exited 0" in results["plan"].log
    assert not results["comment"].failed, results["comment"].log
    (comment,) = [c for c in forge.state()["comments"] if c["pr"] == 1]
    assert "runningJobs" in comment["body"]


def gitlab_config(tmp_path: Path, install: str, wheel: str) -> Path:
    """The example `.gitlab-ci.yml` for `install`: the component from trainform's project
    at a tag (GitLab cannot include a file through a submodule), with the wheel as
    `install` for a wheel. Prod only."""
    inputs = {"environments": "prod"}
    if install == "wheel":
        inputs["install"] = f"tools/{wheel}"
    config = tmp_path / "gitlab-ci.yml"
    text = "include:\n  - component: $CI_SERVER_FQDN/ml-platform/trainform/trainform@0.1.0\n"
    text += "    inputs:\n" + "".join(f"      {k}: {v}\n" for k, v in inputs.items())
    config.write_text(text, encoding="utf-8")
    return config


@pytest.mark.parametrize("install", ["submodule", "wheel"])
def test_gitlab_merge_request_with_trainform_as(
    install: str, tmp_path: Path, clean_python: Path, api: tuple[gitlab_api.Forge, str],
    origin_template: Path, trainform_wheel: Path, trainform_repository: Path,
) -> None:
    source = trainform_wheel if install == "wheel" else trainform_repository
    project = Project(tmp_path, clean_python, api, origin_template, install, source,
                      gitlab_config(tmp_path, install, trainform_wheel.name))
    pipeline = project.merge_request(1, changed(project.origin))
    for name in ("trainform", "trainform-plan", "trainform-review"):
        assert pipeline.jobs[name].status == "success", pipeline.jobs[name].log
    assert "prod: validate exited 0, plan exited 2" in pipeline.jobs["trainform-plan"].log
    (note,) = api[0].notes[1]
    assert "runningJobs" in note["body"]
