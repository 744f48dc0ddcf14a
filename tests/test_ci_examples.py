"""The GitOps CI examples (examples/ci/) are valid YAML, and every `trainform` command
they run parses against this version's CLI: a renamed option fails here, not in a user's
pipeline. The workflow shape is checked too: read-only plan, trusted policies, trainform
installed from the trusted side only, apply of a saved plan on the main branch only. The
files pass actionlint (GitHub) and GitLab's CI JSON Schema (check-jsonschema's vendored
copy). tests/ci/ runs both pipelines step by step."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from ruamel.yaml import YAML
from trainform.cli import cli

from tests.ci.gitlab_runner import Runner as GitLabRunner
from tests.ci.gitlab_runner import flatten

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "ci"
GITHUB = EXAMPLES / "github" / "workflows" / "trainform.yml"
GITLAB = EXAMPLES / "gitlab" / ".gitlab-ci.yml"
ACTION = REPO / "ci" / "github" / "action.yml"
COMPONENT = REPO / "templates" / "trainform.yml"
SHELL_BREAKS = {">", ">>", "|", "||", "&&", ";", "2>&1"}


def load(path: Path) -> Any:
    """A YAML file; a CI/CD component's jobs (the document after its `spec:` header)."""
    text = path.read_text(encoding="utf-8")
    if path == COMPONENT:
        text = text.split("\n---\n", 1)[1]
    return YAML(typ="safe").load(text)


def scripts(node: Any) -> Iterator[str]:
    """Every shell text under `run:` (GitHub) and `script:` (GitLab) keys."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("run", "script") and isinstance(value, str):
                yield value
            elif key == "script" and isinstance(value, list):
                yield from (item for item in value if isinstance(item, str))
            else:
                yield from scripts(value)
    elif isinstance(node, list):
        for item in node:
            yield from scripts(item)


def trainform_commands(text: str) -> Iterator[list[str]]:
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line.strip().rstrip(";"), comments=True)
        while "trainform" in words:
            words = words[words.index("trainform") + 1 :]
            command = []
            for word in words:
                if word in SHELL_BREAKS:
                    break
                command.append(word.removesuffix(";"))
                if word.endswith(";"):
                    break
            yield command


def all_commands(path: Path) -> list[list[str]]:
    """Every `trainform` command of `path`; a bash array expansion (`"${holders[@]}"`, options
    built in the script) is left out."""
    return [
        [word for word in command if not re.fullmatch(r"\$\{\w+\[@\]\}", word)]
        for text in scripts(load(path)) for command in trainform_commands(text)
    ]


def materialize(command: list[str], root: Path) -> None:
    """Create the folders and files the pipeline's checkout would hold (click checks them)."""
    for word in command[1:]:
        if word.endswith(".tfplan"):
            (root / word).parent.mkdir(parents=True, exist_ok=True)
            (root / word).touch()
    for option, value in zip(command, command[1:], strict=False):
        if option == "--policies":
            (root / value).mkdir(parents=True, exist_ok=True)
        elif option == "--trace":
            (root / value).parent.mkdir(parents=True, exist_ok=True)
            (root / value).touch()


@pytest.mark.parametrize("path", [ACTION, COMPONENT], ids=["github", "gitlab"])
def test_every_trainform_command_parses(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    commands = all_commands(path)
    for command in commands:
        materialize(command, tmp_path)
    names = {command[0] for command in commands}
    assert {"validate", "plan", "review", "apply"} <= names, names
    for command in commands:
        context = click.Context(cli, info_name="trainform")
        subcommand = cli.get_command(context, command[0])
        assert subcommand is not None, f"unknown command: trainform {command[0]}"
        try:
            subcommand.make_context(command[0], command[1:], parent=context)
        except click.UsageError as exc:
            pytest.fail(f"`trainform {' '.join(command)}` in {path.name}: {exc.format_message()}")


# Where the trusted side is: GitHub's second checkout (actions/checkout empties its folder
# first), GitLab's fresh folder outside the merge request's checkout.
TRUSTED = {ACTION: "$TRUSTED/", COMPONENT: "$TRUSTED/tree/"}


@pytest.mark.parametrize("path", [ACTION, COMPONENT], ids=["github", "gitlab"])
def test_plans_are_read_only_and_judged_by_trusted_policies(path: Path) -> None:
    plans = [c for c in all_commands(path) if c[0] == "plan" and "-out" in c]
    reviewed = [c for c in plans if "--no-lock" in c]
    assert reviewed, "the merge-request plan runs read-only"
    for plan in reviewed:
        assert {"--locked", "--detailed-exitcode"} <= set(plan)
        assert plan[plan.index("--policies") + 1].startswith(TRUSTED[path])
    reviews = [c for c in all_commands(path) if c[0] == "review"]
    assert reviews and all(
        c[c.index(option) + 1].startswith(TRUSTED[path])
        for c in reviews for option in ("--policies", "--trace")
    )
    applies = [c for c in all_commands(path) if c[0] == "apply"]
    assert applies and all(c[-1].endswith(".tfplan") or "--replan-if-same-changes" in c
                           for c in applies), "apply a saved plan"
    # On merge: main's plan made now is applied only when it makes the reviewed changes.
    (merge,) = [c for c in applies if "--replan-if-same-changes" in c]
    assert merge[merge.index("--replan-if-same-changes") + 1].startswith("reviewed/plan-")
    assert "--save-fresh-plan" in merge


CREDENTIALS = ("AWS_", "REGISTRY_", "TRAINFORM_PLAN_KEY")


def test_github_jobs_hold_only_the_credentials_they_need() -> None:
    jobs = load(GITHUB)["jobs"]
    # Reading: the repository, and the other pull requests' plans for the lock.
    assert jobs["plan"]["permissions"] == {
        "contents": "read", "actions": "read", "pull-requests": "read"}
    platform = {k: v for k, v in jobs["plan"]["env"].items() if k.startswith(("AWS_", "REG"))}
    assert len(platform) == 6 and all("READONLY" in value for value in platform.values())
    for name in ("comment", "fork"):
        assert "env" not in jobs[name] and jobs[name]["permissions"] == {"pull-requests": "write"}
    for env in ("staging", "prod"):
        assert "refs/heads/main" in jobs["staging"]["if"] and jobs[env]["environment"] == env
        assert jobs[f"{env}-approved"]["environment"] == f"{env}-approval"
        assert jobs[f"{env}-approved"]["needs"] == env
    # prod only after staging applied: its reviewed plan or the approved one.
    assert jobs["prod"]["needs"] == ["staging", "staging-approved"]
    assert "needs.staging.result == 'success'" in jobs["prod"]["if"]
    assert "schedule" in load(GITHUB)["on"] and jobs["drift"]["if"] == (
        "github.event_name == 'schedule'"
    )


def action_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for step in job["steps"] if "/ci/github" in step.get("uses", "")]


def test_github_takes_the_action_and_trainform_from_the_trusted_side_only() -> None:
    jobs = load(GITHUB)["jobs"]
    for name, job in jobs.items():
        (step,) = action_steps(job)
        if name in ("plan", "comment", "fork"):
            # The base commit's copy, checked out into .trusted (with its submodules).
            assert step["uses"] == "./.trusted/tools/trainform/ci/github", name
            checkout = job["steps"][-2]
            assert checkout["with"]["path"] == ".trusted", name
            assert checkout["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
            assert checkout["with"]["submodules"] is True
        else:
            # After a merge or on a schedule, main itself is the trusted side.
            assert "pull_request" not in job["if"], name
            assert step["uses"] == "./tools/trainform/ci/github", name
    assert step_of(jobs["plan"])["with"]["trusted"] == ".trusted"
    action = load(ACTION)
    (install,) = [s for s in action["runs"]["steps"] if "pip install" in s.get("run", "")]
    assert install["run"] == 'pip install --quiet "./$INSTALL"'
    assert install["env"]["INSTALL"] == "${{ inputs.trusted }}/${{ inputs.install }}"
    for text in (GITHUB, ACTION, GITLAB, COMPONENT):
        assert "trainform==" not in text.read_text(encoding="utf-8")


def step_of(job: dict[str, Any]) -> dict[str, Any]:
    (step,) = action_steps(job)
    return step


def test_gitlab_installs_the_wheel_built_from_the_trusted_commit() -> None:
    config = load(COMPONENT)
    assert pip_sources(config["trainform"]) == ["$TRUSTED/tree/$TRAINFORM_INSTALL"]
    assert config["trainform"]["before_script"] == []
    assert config["trainform"]["artifacts"]["paths"] == ["trainform-trusted.tar"]
    before = {"script": config[".trainform-trusted"]["before_script"]}
    # The wheel from a folder made by mktemp, never a path inside the checkout.
    assert before["script"][0] == 'TRUSTED="$(mktemp -d)"'
    assert pip_sources(before) == ["$TRUSTED/dist/trainform-*.whl"]
    jobs = [n for n, j in config.items() if isinstance(j, dict) and "stage" in j]
    # Every job but the build and the fork note (which installs nothing) needs the build.
    assert all("trainform" in config[n].get("needs", []) for n in jobs
               if n not in ("trainform", "trainform-fork"))
    fork = config["trainform-fork"]
    assert fork["needs"] == [] and fork["before_script"] == []
    # The example is the component, included with a few lines.
    assert load(GITLAB) == {"include": [{
        "local": "tools/trainform/templates/trainform.yml",
        "inputs": {"environments": "staging prod"},
    }]}


def pip_sources(job: Any) -> list[str]:
    """What each `pip install`/`pip wheel` line of a job installs or builds (its last word)."""
    return [
        shlex.split(line)[-1]
        for text in scripts(job)
        for line in text.splitlines()
        if line.strip().startswith("pip ")
    ]


def tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def spec_repository(tmp_path: Path) -> Path:
    """A spec repository laid out as the example expects: the workflow, and the action in
    trainform's vendored copy (also as the trusted checkout has it)."""
    root = tmp_path / "specs"
    (root / ".github" / "workflows").mkdir(parents=True)
    shutil.copy2(GITHUB, root / ".github" / "workflows" / "trainform.yml")
    for copy in ("tools/trainform/ci/github", ".trusted/tools/trainform/ci/github"):
        shutil.copytree(ACTION.parent, root / copy)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_github_workflow_and_action_pass_actionlint_with_shellcheck(tmp_path: Path) -> None:
    # actionlint runs shellcheck on every `run:` script when it finds it on PATH, and
    # checks each `with:` against the local action's inputs.
    assert Path(tool("shellcheck")).is_file()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [tool("actionlint"), "-no-color"], capture_output=True, text=True, env=env,
        cwd=spec_repository(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_action_scripts_pass_shellcheck() -> None:
    # actionlint does not read a composite action's own scripts: shellcheck them here,
    # each `${{ ... }}` as a plain word, with the -e -o pipefail GitHub runs them with.
    for step in load(ACTION)["runs"]["steps"]:
        if "run" not in step:
            continue
        script = "#!/bin/bash\nset -eo pipefail\n" + re.sub(r"\$\{\{.*?\}\}", "x", step["run"])
        result = subprocess.run(
            [tool("shellcheck"), "-"], input=script, capture_output=True, text=True
        )
        assert result.returncode == 0, f"step {step.get('name')}:\n{result.stdout}"


def test_gitlab_job_scripts_pass_shellcheck() -> None:
    config = load(COMPONENT)
    runner = GitLabRunner(config, Path(), Path(), Path(), "")
    for name in (n for n, job in config.items() if isinstance(job, dict) and "stage" in job):
        job = runner.job(name)
        lines = flatten(job.get("before_script", []))
        script = "#!/bin/bash\n" + "\n".join(lines + flatten(job["script"])) + "\n"
        result = subprocess.run(
            [tool("shellcheck"), "-"], input=script, capture_output=True, text=True
        )
        assert result.returncode == 0, f"job {name}:\n{result.stdout}"


def documents(path: Path, tmp_path: Path) -> list[Path]:
    """Each YAML document of `path` as a file of its own (a component's header and jobs)."""
    parts = path.read_text(encoding="utf-8").split("\n---\n")
    out = []
    for index, part in enumerate(parts):
        out.append(tmp_path / f"{index}-{path.name}")
        out[-1].write_text(part, encoding="utf-8")
    return out


@pytest.mark.parametrize(
    ("path", "schema"),
    [(GITLAB, "vendor.gitlab-ci"), (COMPONENT, "vendor.gitlab-ci"),
     (GITHUB, "vendor.github-workflows"), (ACTION, "vendor.github-actions")],
    ids=["gitlab", "gitlab-component", "github", "github-action"],
)
def test_ci_files_match_their_platform_schema(path: Path, schema: str, tmp_path: Path) -> None:
    for document in documents(path, tmp_path):
        result = subprocess.run(
            [tool("check-jsonschema"), "--builtin-schema", schema, str(document)],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr
