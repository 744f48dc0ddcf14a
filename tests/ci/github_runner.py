"""A small GitHub Actions runner for tests: runs a workflow's jobs as the YAML writes them.

Each `run:` step goes to `bash -e -o pipefail` in the job's workspace with the environment
the runner would set (workflow, job and step `env:`, `GITHUB_*`, a fresh `GITHUB_OUTPUT`
per step). `${{ ... }}` is replaced from a context of known values; an unknown name is an
error, never an empty string. The `uses:` steps this repository's examples use are done
here: `actions/checkout` clones the origin repository at a commit, `actions/setup-python`
is the Python already on PATH, `upload-artifact`/`download-artifact` copy files into and
out of a per-run store that a later run can read through the `gh` stand-in, and a
composite action (`./path`, or trainform's own `OWNER/trainform/ci/github@TAG`, read from
this checkout) runs its steps with its `inputs.*`, its outputs read from them. `if:` is
evaluated with the same context (`&&`, `||`, `==`, `!=`, `!cancelled()`, `always()`,
`failure()`); after a failed step only steps with `always()` or `failure()` run, and
`steps.ID.outcome` is success, failure or skipped.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

ACTION = Path(__file__).resolve().parents[2] / "ci" / "github"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
NAME = re.compile(r"(?<!['\w.])([a-z_]+(?:\.[A-Za-z0-9_-]+)+)")


@dataclass
class StepResult:
    name: str
    code: int
    output: str


@dataclass
class JobResult:
    name: str
    ran: bool
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(step.code != 0 for step in self.steps)

    @property
    def log(self) -> str:
        return "\n".join(f"--- {s.name} (exit {s.code})\n{s.output}" for s in self.steps)


def step_output_names(readers: Any, step: dict[str, Any]) -> list[str]:
    """Outputs of `step` that `readers` read (empty until the step writes them)."""
    found = re.findall(rf"steps\.{re.escape(str(step.get('id')))}\.outputs\.([\w-]+)",
                       str(readers))
    return sorted(set(found))


def resolve(context: dict[str, str], name: str) -> str:
    if name not in context:
        raise KeyError(f"the test runner has no value for `{name}`")
    return context[name]


def substitute(text: str, context: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        expression = match.group(1)
        if " || " in expression:
            for part in expression.split(" || "):
                value = resolve(context, part.strip())
                if value:
                    return value
            return ""
        return resolve(context, expression)

    return EXPRESSION.sub(one, text)


def condition(text: str, context: dict[str, str], failed: bool = False) -> bool:
    """A job's or step's `if:`; `always()`, `failure()` and `success()` as of the steps so
    far (a step without one of them runs only while every earlier step succeeded)."""
    python = text.replace("!cancelled()", "True").replace("always()", "True")
    python = python.replace("failure()", repr(failed)).replace("success()", repr(not failed))
    python = python.replace("&&", " and ").replace("||", " or ")
    python = NAME.sub(lambda m: repr(resolve(context, m.group(1))), python)
    return bool(eval(python, {"__builtins__": {}}, {"True": True}))  # noqa: S307 - test-only


@dataclass
class Runner:
    """Runs the jobs of one workflow for one event; artifacts live in `store`."""

    workflow: dict[str, Any]
    origin: Path
    workspace: Path
    store: Path
    path: str
    counter: Iterator[int] = field(default_factory=itertools.count)

    def run_job(self, job_name: str, context: dict[str, str], run_id: str) -> JobResult:
        job = self.workflow["jobs"][job_name]
        context = {**context, "github.run_id": run_id}
        if "if" in job and not condition(job["if"], context):
            return JobResult(job_name, ran=False)
        shutil.rmtree(self.workspace, ignore_errors=True)
        self.workspace.mkdir(parents=True)
        env = {**os.environ, "PATH": self.path, "CI": "true", "GITHUB_ACTIONS": "true"}
        env.update({k: v for k, v in self.runner_variables(context, run_id).items()})
        for scope in (self.workflow.get("env", {}), job.get("env", {})):
            env.update({k: substitute(str(v), context) for k, v in scope.items()})
        result = JobResult(job_name, ran=True)
        self.run_steps(job["steps"], env, context, run_id, result)
        for key, value in job.get("outputs", {}).items():
            try:
                result.outputs[key] = substitute(value, context)
            except KeyError:
                result.outputs[key] = ""
        return result

    def run_steps(
        self, steps: list[dict[str, Any]], env: dict[str, str], context: dict[str, str],
        run_id: str, result: JobResult, readers: Any = None,
    ) -> None:
        """Run `steps` (a job's or a composite action's) in order into `result`; `readers`
        is what else reads their outputs (a composite action's `outputs:`)."""
        for step in steps:
            # A step not run (yet) is `skipped` and its outputs are empty, as on GitHub.
            context[f"steps.{step.get('id')}.outcome"] = "skipped"
            for output_name in step_output_names([steps, readers], step):
                context[f"steps.{step.get('id')}.outputs.{output_name}"] = ""
        for index, step in enumerate(steps):
            name = step.get("name") or step.get("uses") or step["run"].splitlines()[0]
            status_function = any(f in step.get("if", "") for f in ("always()", "failure()"))
            if result.failed and not status_function:
                continue
            if "if" in step and not condition(step["if"], context, result.failed):
                continue
            code, output, outputs = self.run_step(step, env, context, run_id)
            result.steps.append(StepResult(name, code, output))
            key = f"steps.{step.get('id', index)}"
            context[f"{key}.outcome"] = "success" if code == 0 else "failure"
            for output_name, value in outputs.items():
                context[f"{key}.outputs.{output_name}"] = value

    def run_composite(
        self, folder: Path, with_: dict[str, str], env: dict[str, str], context: dict[str, str],
        run_id: str,
    ) -> tuple[int, str, dict[str, str]]:
        """A composite action: its inputs from `with:` or their defaults, its steps run with
        `inputs.*` and `github.action_path`, its outputs read from its steps."""
        action = YAML(typ="safe").load((folder / "action.yml").read_text(encoding="utf-8"))
        unknown = set(with_) - set(action.get("inputs", {}))
        if unknown:
            return 1, f"unexpected inputs {sorted(unknown)} for {folder}", {}
        inner = {k: v for k, v in context.items() if not k.startswith("steps.")}
        for name, spec in action.get("inputs", {}).items():
            inner[f"inputs.{name}"] = with_.get(name, substitute(str(spec.get("default", "")),
                                                                   context))
        inner["github.action_path"] = str(folder)
        result = JobResult(str(folder), ran=True)
        self.run_steps(action["runs"]["steps"], {**env, "GITHUB_ACTION_PATH": str(folder)},
                       inner, run_id, result, action.get("outputs"))
        outputs = {k: substitute(v["value"], inner) for k, v in action.get("outputs", {}).items()}
        return (1 if result.failed else 0), result.log, outputs

    def runner_variables(self, context: dict[str, str], run_id: str) -> dict[str, str]:
        return {
            "GITHUB_SHA": context["github.sha"],
            "GITHUB_REF": context["github.ref"],
            "GITHUB_EVENT_NAME": context["github.event_name"],
            "GITHUB_REPOSITORY": context["github.repository"],
            "GITHUB_RUN_ID": run_id,
            "GITHUB_WORKFLOW_REF": f"{context['github.repository']}/.github/workflows/"
            f"trainform.yml@{context['github.ref']}",
            "GITHUB_WORKSPACE": str(self.workspace),
            "RUNNER_TEMP": str(self.workspace.parent / "runner-temp"),
        }

    def run_step(
        self, step: dict[str, Any], env: dict[str, str], context: dict[str, str], run_id: str
    ) -> tuple[int, str, dict[str, str]]:
        with_ = {k: substitute(str(v), context) for k, v in step.get("with", {}).items()}
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout@"):
            target = self.workspace / with_.get("path", ".")
            ref = with_.get("ref") or context["github.sha"]
            if target.is_dir() and not (target / ".git").is_dir():
                # actions/checkout empties a folder that is not a repository before it
                # clones (src/git-directory-helper.ts, prepareExistingDirectory): files a
                # pull request planted under `path:` are gone.
                shutil.rmtree(target)
            subprocess.run(["git", "clone", "-q", str(self.origin), str(target)], check=True)
            subprocess.run(["git", "-C", str(target), "checkout", "-q", ref], check=True)
            if with_.get("submodules", "").lower() in ("true", "recursive"):
                subprocess.run(
                    ["git", "-C", str(target), "-c", "protocol.file.allow=always",
                     "submodule", "update", "--init", "--recursive", "-q"], check=True,
                )
            return 0, f"checked out {ref}", {}
        if uses.startswith("actions/setup-python@"):
            return 0, "python from PATH", {}
        if uses.startswith("actions/upload-artifact@"):
            folder = self.store / run_id / with_["name"]
            folder.mkdir(parents=True, exist_ok=True)
            for pattern in with_["path"].split():
                for source in self.workspace.glob(pattern):
                    if source.is_dir():
                        shutil.copytree(source, folder / source.name, dirs_exist_ok=True)
                    else:
                        shutil.copy2(source, folder / source.name)
            return 0, f"uploaded {with_['name']}", {}
        if uses.startswith("actions/download-artifact@"):
            folder = self.store / run_id / with_["name"]
            if not folder.is_dir():
                return 1, f"no artifact {with_['name']} in run {run_id}", {}
            shutil.copytree(folder, self.workspace, dirs_exist_ok=True)
            return 0, f"downloaded {with_['name']}", {}
        if uses.startswith("./"):
            return self.run_composite(self.workspace / uses, with_, env, context, run_id)
        if re.fullmatch(r"[\w.-]+/trainform/ci/github@[\w.-]+", uses):
            # trainform's action from its repository at a tag: this checkout's version.
            return self.run_composite(ACTION, with_, env, context, run_id)
        if uses:
            raise AssertionError(f"the test runner does not know {uses}")
        step_env = {**env}
        step_env.update({k: substitute(str(v), context) for k, v in step.get("env", {}).items()})
        outputs_file = self.workspace.parent / f"output-{run_id}-{next(self.counter)}"
        summary = self.workspace.parent / f"summary-{run_id}"
        outputs_file.write_text("")
        step_env.update(GITHUB_OUTPUT=str(outputs_file), GITHUB_STEP_SUMMARY=str(summary))
        script = self.workspace.parent / "step.sh"
        script.write_text(substitute(step["run"], context))
        completed = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace, env=step_env, capture_output=True, text=True, timeout=300,
        )
        outputs = dict(
            line.split("=", 1) for line in outputs_file.read_text().splitlines() if "=" in line
        )
        return completed.returncode, completed.stdout + completed.stderr, outputs
