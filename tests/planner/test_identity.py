"""Stable run identity: code is the content the job runs, the host runtime is what its
interpreter is, and a lock made in one place holds in another.

The end-to-end test works in a Git repository with a tiny job on the local provider: a
commit that changes only a Quota plans no job change; a change to the job's code folder
(committed or not) plans a new run, with the code as the reason.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from trainform.planner.lockfile import code_digest, resolve_code
from trainform.providers.local import runtime
from trainform.providers.local.layout import code_files, snapshot_code
from trainform.providers.local.provider import digest_of
from trainform.providers.local.runtime import host_runtime, job_interpreter, runtime_identity

from tests.helpers import run_cli, write_tree

JOB = "TrainingJob/research/tiny"
QUOTA = "Quota/research/research-default"

CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local, connection: {root: .trainform}}
state: {backend: local, path: .trainform/state.json}
"""

PLATFORM = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: research}
spec: {owners: [ml-platform@example.com]}
---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: this-machine}
spec: {provider: local, nodes: 1, cpu: 2, memory: 4Gi}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: default-queue}
spec:
  pools:
    - pool: this-machine
      nominalQuota: {cpu: 2, memory: 4Gi}
---
apiVersion: trainform/v1
kind: Quota
metadata: {name: research-default, project: research}
spec:
  queue: default-queue
  limits: {cpu: 2, memory: 4Gi, runningJobs: RUNNING}
---
apiVersion: trainform/v1
kind: Image
metadata: {name: host-python}
spec: {runtime: host}
"""

TRAINING = """\
apiVersion: trainform/v1
kind: TrainingJob
metadata: {name: tiny, project: research}
spec:
  queue: default-queue
  image: host-python
  code: {repo: code}
  command: [python3, train.py]
  resources: {nodes: 1, cpu: 1, memory: 256Mi}
  maxRuntime: 10m
"""

TRAIN_PY = """\
import json, os, pathlib
out = pathlib.Path(os.environ["TRAINFORM_OUTPUT_DIR"])
out.mkdir(parents=True, exist_ok=True)
(out / "model.json").write_text(json.dumps({"ok": True}))
"""


def platform_specs(running_jobs: int) -> str:
    return PLATFORM.replace("RUNNING", str(running_jobs))


def spec_folder(root: Path) -> Path:
    write_tree(
        root,
        {
            "trainform.yaml": CONFIG,
            ".gitignore": ".trainform/\n",
            "specs/platform.yaml": platform_specs(2),
            "specs/training.yaml": TRAINING,
            "code/train.py": TRAIN_PY,
            "code/lib/helpers.py": "VALUE = 1\n",
        },
    )
    return root


def git(folder: Path, *args: str) -> str:
    environment = {
        **os.environ,
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    result = subprocess.run(
        ["git", *args], cwd=folder, env=environment, capture_output=True, text=True, check=True
    )
    return result.stdout


def commit_all(folder: Path, message: str) -> None:
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", message)


def cli(folder: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = run_cli(*args, cwd=folder, env=env)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


def planned(folder: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, dict]]:
    """The exit code of `plan --detailed-exitcode` and its changes by address."""
    result = run_cli("plan", ".", "--detailed-exitcode", "--format", "json", cwd=folder, env=env)
    assert result.returncode in (0, 2), result.stdout + result.stderr
    document = json.loads(result.stdout)
    changes = {change["address"]: change for change in document["changes"]}
    return result.returncode, changes


def changed(changes: dict[str, dict]) -> dict[str, str]:
    return {a: c["action"] for a, c in changes.items() if c["action"] not in ("no-op", "noop")}


# --- code identity --------------------------------------------------------------------


@pytest.mark.slow
def test_a_quota_commit_plans_no_job_change_and_a_code_change_plans_a_new_run(
    tmp_path: Path,
) -> None:
    folder = spec_folder(tmp_path / "repo")
    git(folder, "init", "-q")
    commit_all(folder, "platform and job")

    code, output = cli(folder, "apply", ".", "--auto-approve")
    assert code == 0, output
    code, output = cli(folder, "status", "--dir", ".", "--wait", "--timeout", "60")
    assert code == 0, output
    code, output = cli(folder, "status", "--dir", ".", "--format", "json")
    job = json.loads(output)["jobs"][0]
    assert job["address"] == JOB and job["phase"] == "succeeded", output
    code, output = cli(folder, "lineage", JOB, "--format", "json")
    lineage = json.loads(output)["lineage"]
    assert lineage["specCommit"] == git(folder, "rev-parse", "HEAD").strip(), lineage
    assert lineage["code"]["contentDigest"].startswith("sha256:")
    code, changes = planned(folder)
    assert code == 0, changed(changes)

    (folder / "specs" / "platform.yaml").write_text(platform_specs(3), encoding="utf-8")
    commit_all(folder, "a quota change only")
    code, changes = planned(folder)
    assert code == 2
    assert changed(changes) == {QUOTA: "update"}, changes

    code, output = cli(folder, "apply", ".", "--auto-approve")
    assert code == 0, output
    (folder / "code" / "lib" / "helpers.py").write_text("VALUE = 2\n", encoding="utf-8")
    for state in ("uncommitted", "committed"):
        if state == "committed":
            commit_all(folder, "a code change")
        code, changes = planned(folder)
        assert code == 2, state
        assert set(changed(changes)) == {JOB}, (state, changes)
        reasons = " ".join(str(reason) for reason in changes[JOB]["reasons"])
        assert "code" in reasons, (state, changes[JOB])
    code, output = cli(folder, "plan", ".")
    assert "code changed in 1 file (lib/helpers.py)" in output, output


def test_a_clean_and_a_dirty_tree_of_the_same_content_have_one_identity(
    tmp_path: Path,
) -> None:
    folder = spec_folder(tmp_path / "repo")
    git(folder, "init", "-q")
    commit_all(folder, "first")
    code = {"repo": "code"}
    clean = resolve_code(code, folder)
    assert set(clean) == {"contentDigest"} and clean["contentDigest"].startswith("sha256:")

    helpers = folder / "code" / "lib" / "helpers.py"
    helpers.write_text("VALUE = 2\n", encoding="utf-8")
    dirty = resolve_code(code, folder)
    assert dirty != clean
    commit_all(folder, "second")
    assert resolve_code(code, folder) == dirty  # committing the same content changes nothing

    (folder / "specs" / "notes.txt").write_text("dirty elsewhere\n", encoding="utf-8")
    os.utime(helpers, (1, 1))  # mtimes are not content
    assert resolve_code(code, folder) == dirty
    git(folder, "commit", "-q", "--allow-empty", "-m", "a new HEAD")
    assert resolve_code(code, folder) == dirty


def test_the_code_identity_ignores_the_folder_path_and_cache_folders(tmp_path: Path) -> None:
    first = spec_folder(tmp_path / "one")
    second = tmp_path / "elsewhere" / "two"
    shutil.copytree(first, second)
    (second / "code" / "__pycache__").mkdir()
    (second / "code" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    (second / "code" / ".git").mkdir()
    assert code_digest(first / "code") == code_digest(second / "code")


def test_the_code_identity_sees_the_execute_bit_and_links(tmp_path: Path) -> None:
    folder = spec_folder(tmp_path / "repo") / "code"
    before = code_digest(folder)
    (folder / "train.py").chmod(0o755)
    executable = code_digest(folder)
    assert executable != before
    (folder / "train.py").chmod(0o700)  # group and other bits follow the umask: not content
    assert code_digest(folder) == executable
    (folder / "link.py").symlink_to("lib/helpers.py")
    linked = code_digest(folder)
    assert linked != executable
    (folder / "link.py").unlink()
    (folder / "link.py").symlink_to("train.py")
    assert code_digest(folder) != linked  # a link is its target text


def test_a_code_folders_trainformignore_leaves_files_out_of_snapshot_and_identity(
    tmp_path: Path,
) -> None:
    code = tmp_path / "code"
    rules = "# never run\nREADME.md\nnotes/\n*.ipynb\n!keep.ipynb\n/build\n"
    write_tree(code, {
        ".trainformignore": rules, "train.py": "print(1)\n", "README.md": "a",
        "notes/todo.md": "b", "lab.ipynb": "{}", "keep.ipynb": "{}", "build/x.o": "c",
        "pkg/build/keep.py": "d", "pkg/README.md": "e",
    })  # fmt: skip
    before = code_digest(code)
    selected = [relative for relative, _ in code_files(code)]
    assert selected == [".trainformignore", "keep.ipynb", "pkg/build/keep.py", "train.py"]
    snapshot = tmp_path / "snapshot"
    assert snapshot_code(code, snapshot)
    assert [relative for relative, _ in code_files(snapshot)] == selected
    copied = [p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file()]
    assert sorted(copied) == selected
    (code / "README.md").write_text("edited")
    (code / "notes" / "more.md").write_text("new")
    assert code_digest(code) == before  # what it lists changes nothing
    (code / "train.py").write_text("print(2)\n")
    assert code_digest(code) != before
    # a link in its place is refused: the rules must be the folder's own file
    (code / ".trainformignore").unlink()
    (code / ".trainformignore").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="plain file"):
        code_digest(code)


def test_the_spec_folders_trainformignore_is_not_applied_to_code_at_its_root(
    tmp_path: Path,
) -> None:
    write_tree(tmp_path / "repo", {
        "trainform.yaml": "apiVersion: trainform/v1\n", ".trainformignore": "code/\n",
        "code/train.py": "print(1)\n",
    })  # fmt: skip
    assert "code/train.py" in [relative for relative, _ in code_files(tmp_path / "repo")]


def test_the_snapshot_copies_exactly_what_the_identity_covers(tmp_path: Path) -> None:
    folder = spec_folder(tmp_path / "repo")
    local_root = folder / ".trainform"
    write_tree(local_root, {"platform.db": "x", "runs/a.log": "y"})
    write_tree(folder / ".venv", {"bin/python": "z"})
    (folder / "code" / "run.sh").symlink_to("train.py")
    snapshot = tmp_path / "snapshot"
    assert snapshot_code(folder, snapshot, exclude=(local_root,))
    selected = [relative for relative, _ in code_files(folder, (local_root,))]
    assert selected == [relative for relative, _ in code_files(snapshot)]
    assert ".gitignore" in selected and "code/run.sh" in selected
    assert not any(p.startswith((".trainform", ".venv")) for p in selected)
    assert code_digest(folder, (local_root,)) == code_digest(snapshot)
    assert (snapshot / "code" / "run.sh").is_symlink()


# --- host runtime identity -------------------------------------------------------------


def test_the_runtime_identity_is_name_version_pairs_only() -> None:
    distributions = [("Foo_Bar", "1.0"), ("pyyaml", "6.0.1"), ("foo.bar", "9.9")]
    identity = runtime_identity("CPython", "3.11.7", distributions)
    assert identity["implementation"] == "CPython" and identity["python"] == "3.11.7"
    assert identity["distributions"] == 2  # the first foo-bar on sys.path is the one used
    assert runtime_identity("CPython", "3.11.7", distributions[:2][::-1]) == identity
    newer = runtime_identity("CPython", "3.11.7", [("Foo-Bar", "1.1"), ("PyYAML", "6.0.1")])
    assert newer["distributionsDigest"] != identity["distributionsDigest"]
    assert digest_of(newer) != digest_of(identity)
    assert digest_of(runtime_identity("CPython", "3.11.8", distributions)) != digest_of(identity)


def _alias_of_this_interpreter(tmp_path: Path) -> tuple[Path, Path]:
    """(bin folder of this test's interpreter, the same folder reached by another path)."""
    if sys.prefix != sys.base_prefix:  # a venv: the interpreter finds it from its folder
        alias = tmp_path / "another" / "place" / "venv"
        alias.parent.mkdir(parents=True)
        alias.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
        return Path(sys.prefix) / "bin", alias / "bin"
    alias = tmp_path / "another" / "bin"
    alias.mkdir(parents=True)
    (alias / "python3").symlink_to(Path(sys.executable).resolve())
    return Path(sys.executable).parent, alias


def test_the_host_runtime_ignores_install_paths_and_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, alias = _alias_of_this_interpreter(tmp_path)
    monkeypatch.setenv("PATH", f"{real}{os.pathsep}/usr/bin")
    here = host_runtime()
    monkeypatch.setenv("PATH", f"{alias}{os.pathsep}/usr/bin")
    assert job_interpreter().startswith(str(alias))
    monkeypatch.setattr(platform, "platform", lambda *a, **k: "Linux-0.0.1-other-kernel")
    monkeypatch.setattr(sys, "executable", "/somewhere/else/python3")
    there = host_runtime()
    assert there == here
    assert set(here) == {"implementation", "python", "distributionsDigest", "distributions"}
    assert here["python"] == platform.python_version()
    assert not any("/" in str(value) for key, value in here.items() if key != "distributionsDigest")


def test_the_host_runtime_changes_with_a_distribution_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reported = {"implementation": "CPython", "python": "3.11.7", "distributions": [["a", "1"]]}

    def fake_run(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 0, json.dumps(reported), "")

    monkeypatch.setattr(runtime.subprocess, "run", fake_run)
    runtime._probe.cache_clear()
    try:
        first = digest_of(host_runtime())
        reported["distributions"] = [["a", "2"]]
        runtime._probe.cache_clear()
        second = digest_of(host_runtime())
    finally:
        runtime._probe.cache_clear()
    assert first != second


# --- a lock made elsewhere --------------------------------------------------------------


def test_a_lock_made_in_one_folder_is_not_stale_in_a_copy_elsewhere(tmp_path: Path) -> None:
    first = spec_folder(tmp_path / "machine-one" / "specs")
    real, alias = _alias_of_this_interpreter(tmp_path)
    path = os.environ.get("PATH", "")
    code, output = cli(first, "lock", ".", env={"PATH": f"{real}{os.pathsep}{path}"})
    assert code == 0, output
    lock = json.loads((first / "trainform.lock").read_text(encoding="utf-8"))
    assert set(lock["code"]["code#."]) == {"contentDigest"}
    assert "/" not in json.dumps(lock["images"]).replace("Image/", "")

    second = tmp_path / "machine-two" / "checkout"
    shutil.copytree(first, second)
    moved = {"PATH": f"{alias}{os.pathsep}{path}"}
    code, output = cli(second, "plan", ".", "--locked", "--detailed-exitcode", env=moved)
    assert code in (0, 2), output
    assert "stale" not in output, output


def test_code_at_the_spec_root_does_not_change_identity_when_the_lock_is_written(
    tmp_path: Path,
) -> None:
    from trainform.planner.lockfile import local_roots
    from trainform.specs import load_specs

    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG_LOCAL, "train.py": "print('hi')\n"})
    config = load_specs(root).config
    before = code_digest(root, local_roots(config, root))
    (root / "trainform.lock").write_text('{"formatVersion": 1}\n', encoding="utf-8")
    assert code_digest(root, local_roots(config, root)) == before
    copied = tmp_path / "copy"
    snapshot_code(root, copied, exclude=local_roots(config, root))
    assert not (copied / "trainform.lock").exists()


CONFIG_LOCAL = "apiVersion: trainform/v1\nproviders:\n  - {name: local, type: local}\n"
