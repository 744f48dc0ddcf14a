"""No spec value reaches a process as an option or through a shell (issue 13, part 1).

Real CLI runs on attack folders: a job whose `code.repo` is each canary payload is refused
by every command that loads specs, with a diagnostic at the repo's file:line, and the
canary never appears. Property tests feed shell metacharacters, leading dashes, `..`, NUL
and newlines into `code.repo`, `code.ref` and `code.path` (through the library, not the CLI)
and find a diagnostic or a confined value, never an execution or an escape; and
planner.lockfile, with subprocess.run recorded, ends git's options with `--` before any
spec value. The Slurm guards (sacctmgr arguments, hostlists, job ids, srun) are pinned too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainform.planner import lockfile
from trainform.planner.lockfile import LockError, resolve_code
from trainform.providers.errors import PermanentProviderError
from trainform.providers.slurm.names import check_hostlist, check_job_id, check_sacctmgr_arguments
from trainform.providers.slurm.runner import command_of
from trainform.specs import SpecLoadError, load_specs
from trainform.specs.code_sources import UnsafeCode, check_code
from trainform.specs.confinement import is_within

from tests.helpers import CONFIG, POOL, PROJECT, QUEUE, REPO, run_cli, training_job, write_tree
from tests.security.support import canary_payloads, write_platform

PROPERTIES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
COMMANDS = (
    ("validate",),
    ("plan",),
    ("plan", "--no-lock"),
    ("lock",),
    ("status",),
    ("apply", "--auto-approve"),
)
ALLOWED = "git.example.com"
WITH_HOSTS = CONFIG + f"security:\n  codeHosts: [{ALLOWED}]\n"
CODE_LINE = 11  # line of `code:` in training_job(extra=...) output


def code_extra(code: dict[str, str]) -> str:
    """A `code:` mapping for training_job(extra=...), written as JSON (which is YAML)."""
    return f"  code: {json.dumps(code)}\n"


def job_with_code(code: dict[str, str]) -> str:
    return training_job(extra=code_extra(code))


def run_all(root: Path) -> list[tuple[tuple[str, ...], subprocess.CompletedProcess[str]]]:
    """Every command that loads specs, side by side (each its own process)."""
    with ThreadPoolExecutor(max_workers=len(COMMANDS)) as pool:
        results = pool.map(lambda args: run_cli(*args, str(root)), COMMANDS)
        return list(zip(COMMANDS, results, strict=True))


# real CLI runs -------------------------------------------------------------------------


def test_canary_repos_are_refused_by_every_command_and_nothing_runs(tmp_path: Path) -> None:
    """One job per canary payload, all in one folder: every command reports each of them."""
    canary = tmp_path / "canary"
    payloads = canary_payloads(canary)
    jobs = {
        f"job{index}.yaml": training_job(name=f"job-{index}", extra=code_extra({"repo": payload}))
        for index, payload in enumerate(payloads)
    }
    root = write_platform(tmp_path / "specs", jobs, WITH_HOSTS)
    for args, result in run_all(root):
        output = result.stdout + result.stderr
        assert result.returncode == 1, (args, output)
        assert "Traceback" not in output and "internal error" not in output, (args, output)
        assert output.count("field:    spec.code.repo") == len(payloads), (args, output)
        for index in range(len(payloads)):
            assert f"job{index}.yaml:{CODE_LINE}:" in output, (args, index, output)
        assert "error[code-repo]" in output, (args, output)
    assert not canary.exists()


@pytest.mark.parametrize(
    ("code", "diagnostic", "message"),
    [
        pytest.param({"repo": "/etc"}, "path-escape", "absolute path", id="absolute"),
        pytest.param({"repo": "file:///etc"}, "code-repo", "file://", id="file-url"),
        pytest.param({"repo": "../outside"}, "path-escape", "outside", id="dot-dot"),
        pytest.param({"repo": "leak"}, "path-escape", "symbolic link", id="symlink"),
        pytest.param({"repo": "http://git.example.com/a.git"}, "code-repo", "scheme", id="http"),
        pytest.param({"repo": "git://git.example.com/a.git"}, "code-repo", "scheme", id="git"),
        pytest.param({"repo": "ext::sh"}, "code-repo", "transport", id="ext"),
        pytest.param({"repo": "fd::3"}, "code-repo", "transport", id="fd"),
        pytest.param(
            {"repo": "https://me:hunter2@git.example.com/a.git"},
            "code-repo",
            "password",
            id="password",
        ),
        pytest.param(
            {"repo": "ssh://-oProxyCommand=touch%20x/a.git"}, "code-repo", "host", id="ssh-dash"
        ),
        pytest.param({"repo": "https://git.exa$mple.com/a"}, "code-repo", "host", id="shell-host"),
        pytest.param(
            {"repo": "https://git.example.com/a.git", "ref": "--upload-pack=x"},
            "code-ref",
            "starts with '-'",
            id="ref-dash",
        ),
        pytest.param(
            {"repo": "https://git.example.com/a.git", "ref": "main\nx"},
            "code-ref",
            "control character",
            id="ref-newline",
        ),
        pytest.param(
            {"repo": "https://git.example.com/a.git", "path": "../../etc"},
            "code-path",
            "leaves the repository",
            id="path-dot-dot",
        ),
        pytest.param(
            {"repo": "https://git.example.com/a.git", "path": "-rf"},
            "code-path",
            "starts with '-'",
            id="path-dash",
        ),
    ],
)
def test_unsafe_code_locations_are_refused_at_validate(
    tmp_path: Path, code: dict[str, str], diagnostic: str, message: str
) -> None:
    (tmp_path / "outside").mkdir()
    root = write_platform(tmp_path / "specs", {"job.yaml": job_with_code(code)}, WITH_HOSTS)
    (root / "leak").symlink_to(tmp_path / "outside")
    result = run_cli("validate", str(root))
    assert result.returncode == 1, result.stdout
    assert f"error[{diagnostic}]" in result.stdout, result.stdout
    assert message in result.stdout, result.stdout
    assert f"job.yaml:{CODE_LINE}:" in result.stdout


def test_a_repo_on_an_allowed_code_host_validates(tmp_path: Path) -> None:
    code = {"repo": f"https://{ALLOWED}/ml/recipes.git", "ref": "release/2024-06", "path": "sft"}
    root = write_platform(tmp_path, {"job.yaml": job_with_code(code)}, WITH_HOSTS)
    result = run_cli("validate", str(root))
    assert result.returncode == 0, result.stdout
    scp = {"repo": f"git@{ALLOWED}:ml/recipes.git", "commit": "a" * 40}
    root = write_platform(tmp_path, {"job.yaml": job_with_code(scp)}, WITH_HOSTS)
    assert run_cli("validate", str(root)).returncode == 0


def test_a_repo_on_another_host_is_refused_with_how_to_allow_it(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    code = {"repo": "https://attacker.example.net/x.git"}
    root = write_platform(tmp_path / "specs", {"job.yaml": job_with_code(code)}, WITH_HOSTS)
    for args, result in run_all(root):
        assert result.returncode == 1, (args, result.stdout + result.stderr)
        assert "error[code-host]" in result.stdout, (args, result.stdout)
        assert "code host attacker.example.net is not allowed" in result.stdout
        assert "codeHosts: [attacker.example.net]" in result.stdout
    assert not canary.exists()


def test_without_code_hosts_no_remote_repository_is_allowed(tmp_path: Path) -> None:
    code = {"repo": f"https://{ALLOWED}/a.git", "commit": "b" * 40}
    root = write_platform(tmp_path, {"job.yaml": job_with_code(code)})
    result = run_cli("validate", str(root))
    assert result.returncode == 1
    assert "security.codeHosts in trainform.yaml: none" in result.stdout


def test_code_in_the_spec_folder_locks_without_contacting_anyone(tmp_path: Path) -> None:
    root = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", root)
    result = run_cli("lock", str(root))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "code#." in (root / "trainform.lock").read_text()


@pytest.mark.parametrize(
    ("command", "message"),
    [
        pytest.param('["--version"]', "cannot start with '-'", id="option-as-program"),
        pytest.param('[python, "a\\0b"]', "NUL", id="nul"),
    ],
)
def test_job_commands_that_no_argv_can_carry_are_refused(
    tmp_path: Path, command: str, message: str
) -> None:
    job = training_job().replace("command: [python, train.py]", f"command: {command}")
    root = write_platform(tmp_path, {"job.yaml": job})
    result = run_cli("validate", str(root))
    assert result.returncode == 1
    assert "spec.command" in result.stdout and message in result.stdout, result.stdout


# properties: the rules --------------------------------------------------------------------

DANGEROUS = st.sampled_from(
    [";", "|", "&", "$(", "`", ">", "<", "'", '"', "\\", "*", "?", "#", "!", "{", "}",
     "\x00", "\n", "\r", "\t", " ", "\x1b", "--", "-", "..", "../", "/", "~", ":", "::",
     "@", "%0a", "%2e%2e", "ext::", "fd::", "file://", "https://", "ssh://", "git@",
     "--upload-pack=", "-oProxyCommand=", "core.sshCommand="]
)  # fmt: skip
PLAIN = st.text(st.sampled_from("abcxyz019._/-"), max_size=8)
HOSTILE = st.lists(st.one_of(DANGEROUS, PLAIN), min_size=1, max_size=6).map("".join)


@contextmanager
def sandbox(link_out: bool = True) -> Iterator[tuple[Path, Path]]:
    """(spec root with a `code/` folder and a symlink out, canary path), removed after.

    The loader refuses the symlink by itself (discovery), so loader tests go without it."""
    with tempfile.TemporaryDirectory(prefix="trainform-processes-") as temporary:
        base = Path(temporary)
        root = base / "specs"
        (root / "code" / "sub").mkdir(parents=True)
        (base / "outside").mkdir()
        if link_out:
            (root / "code" / "out").symlink_to(base / "outside")
        yield root, base / "canary"


def _outcome_is_safe(root: Path, repo: str, ref: str | None, path: str) -> None:
    try:
        source, folder = check_code(repo, ref, path, root, [ALLOWED])
    except UnsafeCode:
        return
    for value in (repo, ref or "", path):
        assert not value.startswith("-")
        assert not any(ord(c) < 32 or c.isspace() for c in value)
    assert "::" not in repo
    if source.remote:
        assert source.host == ALLOWED
    else:
        assert folder is not None and is_within(folder, root.resolve())


@PROPERTIES
@given(repo=st.one_of(HOSTILE, HOSTILE.map(lambda s: f"https://{ALLOWED}/{s}")))
def test_hostile_repos_get_a_diagnostic_or_a_confined_safe_value(repo: str) -> None:
    with sandbox() as (root, canary):
        _outcome_is_safe(root, repo, None, "")
        try:
            resolve_code({"repo": repo}, root, ())  # the real git, for what passes
        except LockError:
            pass
        assert not canary.exists()


@PROPERTIES
@given(ref=HOSTILE, path=HOSTILE)
def test_hostile_refs_and_paths_get_a_diagnostic_or_a_confined_safe_value(
    ref: str, path: str
) -> None:
    with sandbox() as (root, _canary):
        _outcome_is_safe(root, f"https://{ALLOWED}/a.git", ref, "")
        _outcome_is_safe(root, "code", None, path)
        _outcome_is_safe(root, f"git@{ALLOWED}:a.git", None, path)


@settings(PROPERTIES, max_examples=30)
@given(field=st.sampled_from(["repo", "ref", "path"]), value=HOSTILE)
def test_the_loader_reports_unsafe_code_at_its_field_and_line(field: str, value: str) -> None:
    code = {"repo": "code", field: value}
    if field == "ref":
        code["repo"] = f"https://{ALLOWED}/a.git"
    with sandbox(link_out=False) as (root, _canary):
        write_platform(root, {"job.yaml": job_with_code(code)}, WITH_HOSTS)
        try:
            specs = load_specs(root)
        except SpecLoadError as exc:
            assert any(d.field == f"spec.code.{field}" for d in exc.diagnostics)
            for diagnostic in exc.diagnostics:
                assert diagnostic.location is not None and diagnostic.location.line > 0
            return
        loaded = specs.resources["TrainingJob/research/bigram"].document.spec.code
        assert loaded is not None
        _outcome_is_safe(root, loaded.repo, loaded.ref, loaded.path)


# properties: git's argv ------------------------------------------------------------------


class RecordedRun:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, argv: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((list(argv), options))
        return subprocess.CompletedProcess(argv, 0, "c" * 40 + "\tHEAD\n", "")


def subcommand_at(argv: list[str]) -> int:
    """Index of git's subcommand: after `git` and its `-c key=value` pairs."""
    index = 1
    while argv[index] == "-c":
        index += 2
    return index


@PROPERTIES
@given(
    repo=st.one_of(
        HOSTILE,
        HOSTILE.map(lambda s: f"https://{ALLOWED}/{s}"),
        HOSTILE.map(lambda s: f"git@{ALLOWED}:{s}"),
        HOSTILE.map(lambda s: f"ssh://git@{ALLOWED}:2222/{s}"),
    ),
    ref=st.one_of(st.none(), HOSTILE),
)
def test_lockfile_refuses_unsafe_repos_before_git_and_ends_options_with_dashes(
    monkeypatch: pytest.MonkeyPatch, repo: str, ref: str | None
) -> None:
    recorded = RecordedRun()
    monkeypatch.setattr(lockfile.subprocess, "run", recorded)
    code = {"repo": repo, **({"ref": ref} if ref is not None else {})}
    with sandbox() as (root, _canary):
        try:
            safe = bool(check_code(repo, ref, "", root, [ALLOWED, f"{ALLOWED}:2222"]))
        except UnsafeCode:
            safe = False
        try:
            resolve_code(code, root, [ALLOWED, f"{ALLOWED}:2222"])
        except LockError:
            pass
    if not safe:
        assert recorded.calls == []
    for argv, options in recorded.calls:
        assert argv[0] == "git" and isinstance(argv, list)
        assert "shell" not in options
        sub = subcommand_at(argv)
        assert all(argv[i].count("=") == 1 for i in range(2, sub, 2))
        if argv[sub] == "ls-remote":
            assert argv[sub + 1 :] == ["--quiet", "--", repo, ref or "HEAD"]
            assert options["env"]["GIT_ALLOW_PROTOCOL"] == "https:ssh"
            assert options["env"]["GIT_TERMINAL_PROMPT"] == "0"
            assert "protocol.ext.allow=never" in argv
        else:  # spec-folder code: git runs in the folder; no spec value is an argument
            assert repo not in argv[sub:]
            assert not any(
                part.startswith("-")
                for part in argv[sub + 1 :]
                if part not in ("--verify", "--quiet", "--porcelain", "--")
            )
            assert options["cwd"] == (root / repo).resolve()


def test_ls_remote_never_takes_a_spec_folder_for_a_bare_repository(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = RecordedRun()
    monkeypatch.setattr(lockfile.subprocess, "run", recorded)
    with sandbox() as (root, _canary):
        pins = resolve_code({"repo": f"https://{ALLOWED}/a.git"}, root, [ALLOWED])
    assert pins == {"commit": "c" * 40, "ref": "HEAD"}
    ((argv, options),) = recorded.calls
    assert options["cwd"] == root and options["stdin"] == subprocess.DEVNULL
    assert "safe.bareRepository=explicit" in argv and "core.fsmonitor=false" in argv


def test_a_bare_repository_lookalike_in_the_spec_folder_runs_nothing(tmp_path: Path) -> None:
    """A pull request can commit HEAD, config, objects/ and refs/ into a code folder; git's
    discovery would take the folder for a bare repository and run its core.fsmonitor."""
    canary = tmp_path / "canary"
    root = tmp_path / "specs"
    code = root / "code"
    for folder in ("objects/info", "refs/heads"):
        (code / folder).mkdir(parents=True)
    (code / "HEAD").write_text("ref: refs/heads/main\n")
    (code / "config").write_text(
        f"[core]\n\tbare = true\n\tfsmonitor = touch {canary}\n"
        f"\tsshCommand = touch {canary}\n[alias]\n\tstatus = !touch {canary}\n"
    )
    (code / "train.py").write_text("print(1)\n")
    pins = resolve_code({"repo": "code"}, root, ())
    assert "contentDigest" in pins or "commit" in pins
    assert not canary.exists()


# the Slurm guards --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(["add", "account", "-x"], id="option"),
        pytest.param(["add", "account", "a", "Description=x\nname=y"], id="newline"),
        pytest.param(["add", "qos", "a", "Description='x'"], id="quote"),
    ],
)
def test_sacctmgr_arguments_that_would_change_the_command_are_refused(
    arguments: list[str],
) -> None:
    with pytest.raises(PermanentProviderError, match="cannot run sacctmgr"):
        check_sacctmgr_arguments(arguments)


def test_sacctmgr_arguments_trainform_writes_pass() -> None:
    written = ["add", "account", "research", "Description=trainform:tf:Project/research",
               "cluster=hpc", "GrpTRES=cpu=8,mem=-1", "MaxJobs=-1", "QOS+=training"]  # fmt: skip
    assert check_sacctmgr_arguments(written) == written
    # A plain space stays inside its argv element (no shell, and sacctmgr reads each
    # element as one field): a hand-built site's "GPU research" description round-trips
    # (tests/providers/slurm/test_adoption.py checks it on the real sacctmgr).
    spaced = ["modify", "account", "where", "name=a", "set", "Description=GPU research"]
    assert check_sacctmgr_arguments(spaced) == spaced


@pytest.mark.parametrize("value", ["-h", "--help", ",node1", "node 1", "n\n1"])
def test_hostlists_that_scontrol_would_read_as_options_are_refused(value: str) -> None:
    with pytest.raises(PermanentProviderError):
        check_hostlist(value)
    assert check_hostlist("gpu[01-04],cpu1") == "gpu[01-04],cpu1"


@pytest.mark.parametrize("value", ["-1", "--signal=KILL", "1,2", "1 2", ""])
def test_job_ids_that_scancel_would_read_as_options_are_refused(value: str) -> None:
    with pytest.raises(PermanentProviderError):
        check_job_id(value)
    assert check_job_id("1234_5") == "1234_5"


def test_srun_ends_its_options_before_the_job_command() -> None:
    launch = {"command": ["--export=ALL", "python3"]}
    argv = command_of(launch, {"SLURM_JOB_NUM_NODES": "2"})
    assert argv[argv.index("--") + 1 :] == launch["command"]
    assert command_of(launch, {}) == launch["command"]  # exec'd as given, no shell


def test_git_environment_never_prompts_and_keeps_no_repository_override(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(os.environ, "GIT_DIR", "/elsewhere/.git")
    environment = lockfile.git_environment()
    assert "GIT_DIR" not in environment
    assert environment["GIT_TERMINAL_PROMPT"] == "0"


def test_describing_the_host_runtime_imports_nothing_from_the_spec_folder(
    tmp_path: Path,
) -> None:
    """`lock` and `plan` ask the job interpreter what it is (`python -c`), which puts its
    working directory first on sys.path: modules a pull request adds must never load."""
    canary = tmp_path / "canary"
    shadow = f"open({str(canary)!r}, 'w').close()\n"
    image = "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: host}\nspec: {runtime: host}\n"
    root = tmp_path / "specs"
    write_tree(
        root,
        {
            "trainform.yaml": CONFIG,
            "platform.yaml": "---\n".join(
                [
                    PROJECT,
                    POOL.replace(
                        "nodes: 2, cpu: 64, memory: 512Gi", "nodes: 1, cpu: 1, memory: 1Gi"
                    ),  # noqa: E501
                    QUEUE.replace("{cpu: 64, memory: 512Gi}", "{cpu: 1, memory: 1Gi}"),
                    image,
                ]
            ),
            "json.py": shadow,
            "platform.py": shadow,
            "importlib/__init__.py": shadow,
            "importlib/metadata.py": shadow,
        },
    )
    for command in (["lock", str(root)], ["plan", str(root)]):
        result = run_cli(*command, cwd=root)
        assert result.returncode in (0, 2), result.stdout + result.stderr
        assert not canary.exists(), (command, result.stdout, result.stderr)
