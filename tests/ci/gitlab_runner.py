"""A small GitLab CI runner for tests: runs a `.gitlab-ci.yml`'s jobs as the YAML writes them.

`load_config` merges its `include:`s (`local:` and `component:`, with `spec: inputs:`
interpolated) as GitLab does.

A job is its `extends:` templates deep-merged under it (hashes merged, lists replaced, as
GitLab does), its `rules:` evaluated against the pipeline's predefined variables (`$VAR`,
`==`, `!=`, `&&`, `||`; a matching rule's `when: manual` makes the job wait for a person),
and its `before_script` (the default one unless it has its own) and `script` lines joined
into one `bash -eo pipefail` script, run in a fresh clone of the origin repository at the
pipeline's commit (submodules too when the job sets `GIT_SUBMODULE_STRATEGY`). Global and
job `variables:` are expanded against what is defined before them. Artifacts (`paths`,
globs, kept also on failure with `when: always`) are stored per job id; a job receives those
of its `needs:` (or, without `needs:`, of every earlier stage).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

VARIABLE = re.compile(r"\$\{?(\w+)\}?")


@dataclass
class JobRun:
    name: str
    id: int
    status: str  # success, failed, manual, skipped
    log: str = ""


@dataclass
class Pipeline:
    id: int
    jobs: dict[str, JobRun] = field(default_factory=dict)


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def flatten(lines: list[Any]) -> list[str]:
    """Script lines; a YAML anchor of a list inside a list is spliced in, as GitLab does."""
    out: list[str] = []
    for line in lines:
        out.extend(flatten(line) if isinstance(line, list) else [line])
    return out


def expand(text: str, variables: dict[str, str]) -> str:
    return VARIABLE.sub(lambda m: variables.get(m.group(1), ""), text)


INPUT = re.compile(r"\$\[\[\s*inputs\.([\w-]+)\s*\]\]")
DEFAULT_STAGES = [".pre", "build", "test", "deploy", ".post"]


def text_of(value: Any) -> str:
    """An input as interpolation writes it (a boolean as `true`/`false`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def load_config(path: Path, checkout: Path, components: Path) -> dict[str, Any]:
    """A `.gitlab-ci.yml` with its `include:`s merged in as GitLab does: `local:` from the
    project's `checkout`, `component:` from `components` (a component project's
    `templates/`), each with its `spec: inputs:` header's defaults under the include's
    `inputs:` interpolated for `$[[ inputs.NAME ]]`; an input the spec does not declare is
    an error, as on GitLab."""
    config = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    merged_config: dict[str, Any] = {}
    for include in config.pop("include", []):
        if "local" in include:
            source = checkout / include["local"]
        else:
            name = include["component"].rsplit("/", 1)[1].split("@")[0]
            source = components / f"{name}.yml"
        header, body = source.read_text(encoding="utf-8").split("\n---\n", 1)
        declared = YAML(typ="safe").load(header)["spec"]["inputs"]
        given = include.get("inputs", {})
        unknown = set(given) - set(declared)
        assert not unknown, f"unknown inputs {sorted(unknown)} for {source}"
        values = {k: text_of(given.get(k, v.get("default", ""))) for k, v in declared.items()}
        text = INPUT.sub(lambda m, values=values: values[m.group(1)], body)
        merged_config = merged(merged_config, YAML(typ="safe").load(text))
    return merged(merged_config, config)


def rule_matches(expression: str, variables: dict[str, str]) -> bool:
    python = VARIABLE.sub(lambda m: repr(variables.get(m.group(1), "")), expression)
    python = python.replace("&&", " and ").replace("||", " or ")
    return bool(eval(python, {"__builtins__": {}}, {}))  # noqa: S307 - test-only


@dataclass
class Runner:
    config: dict[str, Any]
    origin: Path
    workspace: Path
    artifacts: Path
    path: str

    def job(self, name: str) -> dict[str, Any]:
        job = self.config[name]
        for parent in reversed([job["extends"]] if isinstance(job.get("extends"), str)
                               else job.get("extends", [])):
            job = merged(self.job(parent), job)
        return job

    def when(self, job: dict[str, Any], variables: dict[str, str]) -> str | None:
        for rule in job.get("rules", [{"if": "True"}]):
            if rule_matches(rule["if"], variables):
                return str(rule.get("when", "on_success"))
        return None

    def run_pipeline(
        self, pipeline: Pipeline, variables: dict[str, str], manual: set[str] = frozenset()
    ) -> Pipeline:
        """Run every job in stage order; a job in `manual` is started by hand if manual."""
        stages = self.config.get("stages", DEFAULT_STAGES)
        names = [n for n in self.config if isinstance(self.config[n], dict)
                 and not n.startswith(".") and "stage" in self.config[n]]
        names.sort(key=lambda n: stages.index(self.config[n]["stage"]))
        for index, name in enumerate(names):
            job = self.job(name)
            run = JobRun(name, pipeline.id * 100 + index, "skipped")
            pipeline.jobs[name] = run
            when = self.when(job, variables)
            needs = job.get("needs")
            earlier = [j for j in pipeline.jobs.values() if j.name != name]
            sources = [pipeline.jobs[n] for n in needs] if needs is not None else earlier
            if when is None or any(s.status == "failed" and not self.config[s.name].get(
                    "allow_failure") for s in sources if s.name in pipeline.jobs):
                continue
            if when == "manual" and name not in manual:
                run.status = "manual"
                continue
            self.run_job(run, job, variables, [s for s in sources if s.status != "skipped"])
        return pipeline

    def start_manual(self, pipeline: Pipeline, name: str, variables: dict[str, str]) -> JobRun:
        """A person starts a waiting manual job (it gets its `needs:` artifacts)."""
        run = pipeline.jobs[name]
        assert run.status == "manual", f"{name} is {run.status}, not waiting"
        job = self.job(name)
        self.run_job(run, job, variables, [pipeline.jobs[n] for n in job.get("needs", [])])
        return run

    def retry(self, pipeline: Pipeline, name: str, variables: dict[str, str]) -> JobRun:
        """A person retries a finished job (it gets its `needs:` artifacts again); when it
        succeeds, the manual jobs that need it wait again, as GitLab re-processes them."""
        run = pipeline.jobs[name]
        job = self.job(name)
        self.run_job(run, job, variables, [pipeline.jobs[n] for n in job.get("needs", [])])
        for other, waiting in pipeline.jobs.items():
            other_job = self.job(other)
            if (run.status == "success" and waiting.status == "skipped"
                    and name in other_job.get("needs", [])
                    and self.when(other_job, variables) == "manual"):
                waiting.status = "manual"
        return run

    def run_job(
        self, run: JobRun, job: dict[str, Any], variables: dict[str, str], sources: list[JobRun]
    ) -> None:
        shutil.rmtree(self.workspace, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", str(self.origin), str(self.workspace)], check=True)
        subprocess.run(["git", "-C", str(self.workspace), "checkout", "-q",
                        variables["CI_COMMIT_SHA"]], check=True)
        if job.get("variables", {}).get("GIT_SUBMODULE_STRATEGY") in ("normal", "recursive"):
            subprocess.run(["git", "-C", str(self.workspace), "-c", "protocol.file.allow=always",
                            "submodule", "update", "--init", "--recursive", "-q"], check=True)
        for source in sources:
            folder = self.artifacts / str(source.id)
            if folder.is_dir():
                shutil.copytree(folder, self.workspace, dirs_exist_ok=True)
        temporary = self.workspace.parent / "tmp"  # the runner's own, outside the checkout
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir()
        env = {**os.environ, "PATH": self.path, "CI": "true", "GITLAB_CI": "true",
               "TMPDIR": str(temporary),
               "CI_JOB_ID": str(run.id), "CI_JOB_NAME": run.name,
               "CI_JOB_URL": f"https://gitlab.example.com/jobs/{run.id}", **variables}
        for scope in (self.config.get("variables", {}), job.get("variables", {})):
            for key, value in scope.items():
                env[key] = expand(str(value), env)
        before = job.get("before_script", self.config.get("default", {}).get("before_script", []))
        script = self.workspace.parent / "job.sh"
        script.write_text("\n".join(flatten(before) + flatten(job["script"])) + "\n")
        completed = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace, env=env, capture_output=True, text=True, timeout=300,
        )
        run.status = "success" if completed.returncode == 0 else "failed"
        run.log = completed.stdout + completed.stderr
        artifacts = job.get("artifacts", {})
        if run.status == "success" or artifacts.get("when") == "always":
            folder = self.artifacts / str(run.id)
            folder.mkdir(parents=True, exist_ok=True)
            for pattern in artifacts.get("paths", []):
                for source in self.workspace.glob(pattern.rstrip("/")):
                    target = folder / source.relative_to(self.workspace)
                    if source.is_dir():
                        shutil.copytree(source, target, dirs_exist_ok=True)
                    else:
                        shutil.copy2(source, target)
