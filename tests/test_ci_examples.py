"""The GitOps CI examples (examples/ci/) are valid YAML, and every `trainform` command
they run parses against this version's CLI: a renamed option fails here, not in a user's
pipeline. The workflow shape is checked too: read-only plan, trusted policies, trainform
installed from the trusted side only, apply of a saved plan on the main branch only. The
files pass actionlint (GitHub) and GitLab's CI JSON Schema (check-jsonschema's vendored
copy). tests/ci/ runs both pipelines step by step."""

from __future__ import annotations

import os
import shlex
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

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "ci"
GITHUB = EXAMPLES / "github" / "workflows" / "trainform.yml"
GITLAB = EXAMPLES / "gitlab" / ".gitlab-ci.yml"
SHELL_BREAKS = {">", ">>", "|", "||", "&&", ";", "2>&1"}


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


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
    return [command for text in scripts(load(path)) for command in trainform_commands(text)]


def materialize(command: list[str], root: Path) -> None:
    """Create the folders and files the pipeline's checkout would hold (click checks them)."""
    if command[0] in ("apply", "show") and command[1].endswith(".tfplan"):
        (root / command[1]).parent.mkdir(parents=True, exist_ok=True)
        (root / command[1]).touch()
    for option, value in zip(command, command[1:], strict=False):
        if option == "--policies":
            (root / value).mkdir(parents=True, exist_ok=True)
        elif option == "--trace":
            (root / value).parent.mkdir(parents=True, exist_ok=True)
            (root / value).touch()


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=["github", "gitlab"])
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
TRUSTED = {GITHUB: ".trusted/", GITLAB: "$TRUSTED/tree/"}


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=["github", "gitlab"])
def test_plans_are_read_only_and_judged_by_trusted_policies(path: Path) -> None:
    plans = [c for c in all_commands(path) if c[0] == "plan" and "--detailed-exitcode" in c]
    assert plans, "the merge-request plan runs with --detailed-exitcode"
    for plan in plans:
        assert {"--locked", "--no-lock", "-out"} <= set(plan)
        assert plan[plan.index("--policies") + 1].startswith(TRUSTED[path])
    reviews = [c for c in all_commands(path) if c[0] == "review"]
    assert reviews and all(
        c[c.index(option) + 1].startswith(TRUSTED[path])
        for c in reviews for option in ("--policies", "--trace")
    )
    applies = [c for c in all_commands(path) if c[0] == "apply"]
    assert applies and all(c[1].endswith(".tfplan") for c in applies), "apply a saved plan"


CREDENTIALS = ("AWS_", "REGISTRY_", "TRAINFORM_PLAN_KEY")


def test_github_jobs_hold_only_the_credentials_they_need() -> None:
    jobs = load(GITHUB)["jobs"]
    assert jobs["plan"]["permissions"] == {"contents": "read"}
    platform = {k: v for k, v in jobs["plan"]["env"].items() if k.startswith(("AWS_", "REG"))}
    assert len(platform) == 4 and all("READONLY" in value for value in platform.values())
    assert not any(key.startswith(CREDENTIALS) for key in jobs["comment"]["env"])
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}
    assert "refs/heads/main" in jobs["apply"]["if"] and jobs["apply"]["environment"] == "production"
    assert jobs["apply-replanned"]["environment"] == "production-approval"
    assert jobs["apply-replanned"]["needs"] == "apply"
    assert "schedule" in load(GITHUB)["on"] and jobs["drift"]["if"] == (
        "github.event_name == 'schedule'"
    )


def pip_sources(job: Any) -> list[str]:
    """What each `pip install`/`pip wheel` line of a job installs or builds (its last word)."""
    return [
        shlex.split(line)[-1]
        for text in scripts(job)
        for line in text.splitlines()
        if line.strip().startswith("pip ")
    ]


def test_github_installs_trainform_from_the_trusted_side_only() -> None:
    jobs = load(GITHUB)["jobs"]
    assert pip_sources(jobs["plan"]) == ["./.trusted/$TRAINFORM_SRC"]
    for name, job in jobs.items():
        if name != "plan" and pip_sources(job):
            # After a merge or on a schedule, main itself is the trusted side.
            assert "pull_request" not in job.get("if", "") and job.get("if"), name
            assert pip_sources(job) == ["./$TRAINFORM_SRC"], name
    assert "trainform==" not in GITHUB.read_text(encoding="utf-8")


def test_gitlab_installs_the_wheel_built_from_the_trusted_commit() -> None:
    config = load(GITLAB)
    assert pip_sources(config["trainform"]) == ["$TRUSTED/tree/$TRAINFORM_SRC"]
    assert config["trainform"]["before_script"] == []
    assert config["trainform"]["artifacts"]["paths"] == ["trainform-trusted.tar"]
    before = {"script": config["default"]["before_script"]}
    # The wheel from a folder made by mktemp, never a path inside the checkout.
    assert before["script"][0] == 'TRUSTED="$(mktemp -d)"'
    assert pip_sources(before) == ["$TRUSTED/dist/trainform-*.whl"]
    jobs = [n for n, j in config.items() if isinstance(j, dict) and "stage" in j]
    assert all("trainform" in config[n].get("needs", []) for n in jobs if n != "trainform")
    assert "trainform==" not in GITLAB.read_text(encoding="utf-8")


def tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def test_github_workflow_passes_actionlint_with_shellcheck() -> None:
    # actionlint runs shellcheck on every `run:` script when it finds it on PATH.
    assert Path(tool("shellcheck")).is_file()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [tool("actionlint"), "-no-color", str(GITHUB)], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_gitlab_job_scripts_pass_shellcheck() -> None:
    config = load(GITLAB)
    runner = GitLabRunner(config, Path(), Path(), Path(), "")
    for name in (n for n, job in config.items() if isinstance(job, dict) and "stage" in job):
        job = runner.job(name)
        lines = flatten(job.get("before_script", config["default"]["before_script"]))
        script = "#!/bin/bash\n" + "\n".join(lines + flatten(job["script"])) + "\n"
        result = subprocess.run(
            [tool("shellcheck"), "-"], input=script, capture_output=True, text=True
        )
        assert result.returncode == 0, f"job {name}:\n{result.stdout}"


@pytest.mark.parametrize(
    ("path", "schema"),
    [(GITLAB, "vendor.gitlab-ci"), (GITHUB, "vendor.github-workflows")],
    ids=["gitlab", "github"],
)
def test_ci_files_match_their_platform_schema(path: Path, schema: str) -> None:
    result = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
