"""SIGTERM and SIGINT during apply through the CLI: a clean stop, then an immediate one.

GitHub Actions cancels with SIGINT, then SIGTERM, then SIGKILL. The CLI runs in a child
process whose local provider is slowed down, so the signal lands while changes are in
flight; the test checks the exit code, the message, that the lock is gone, that the
journal was folded into state, and that applying again converges.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CONFIG, REPO, run_cli, write_tree

SCRIPT = """
import sys, time
from trainform.providers.local.provider import LocalProvider

original = LocalProvider.create

def slow_create(self, resource):
    time.sleep(0.4)
    return original(self, resource)

LocalProvider.create = slow_create
from trainform.cli import main
main(["apply", sys.argv[1], "--auto-approve", "--parallelism", "2"])
"""

PROJECTS = 12


def projects() -> str:
    return "---\n".join(
        f"apiVersion: trainform/v1\nkind: Project\nmetadata: {{name: team-{n}}}\n"
        "spec: {owners: [a@example.com]}\n"
        for n in range(PROJECTS)
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG, "projects.yaml": projects()})
    return root


def start_apply(root: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(root)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "create complete" in line:
            return process
    raise AssertionError("apply never completed a change: " + process.stderr.read())


def applied_addresses(root: Path) -> set[str]:
    state = json.loads((root / ".trainform" / "state.json").read_text())
    return {a for a, r in state["resources"].items() if not r.get("pending")}


@pytest.mark.parametrize(
    ("signum", "code"),
    [
        pytest.param(signal.SIGTERM, 143, id="sigterm"),
        pytest.param(signal.SIGINT, 130, id="sigint"),
    ],
)
def test_a_signal_stops_apply_cleanly_and_applying_again_converges(
    folder: Path, signum: signal.Signals, code: int
) -> None:
    process = start_apply(folder)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)

    assert process.returncode == code, stdout + stderr
    assert f"{signum.name}: starting nothing new" in stderr
    assert "Interrupted:" in stderr and "State is saved" in stderr
    assert "not_started" in stdout or "not started" in stdout.replace("_", " ")
    assert not (folder / ".trainform" / "state.json.lock").exists()
    assert not (folder / ".trainform" / "state.json.journal").exists()
    done = applied_addresses(folder)
    assert 0 < len(done) < PROJECTS

    again = run_cli("apply", str(folder), "--auto-approve")
    assert again.returncode == 0, again.stdout + again.stderr
    assert run_cli("plan", str(folder), "--detailed-exitcode").returncode == 0


def test_a_second_signal_exits_at_once_and_loses_nothing(folder: Path) -> None:
    process = start_apply(folder)
    process.send_signal(signal.SIGTERM)
    assert process.stderr is not None
    first = process.stderr.readline() + process.stderr.readline()
    assert "SIGTERM: starting nothing new" in first  # handled: a second one is not merged
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    stderr = first + stderr

    assert process.returncode == 143, stdout + stderr
    assert "SIGTERM again: stopping now" in stderr
    assert not (folder / ".trainform" / "state.json.lock").exists()
    # the journal is folded in by the next command; every finished change is kept
    again = run_cli("apply", str(folder), "--auto-approve")
    assert again.returncode == 0, again.stdout + again.stderr
    assert applied_addresses(folder) == {f"Project/team-{n}" for n in range(PROJECTS)}
    assert run_cli("plan", str(folder), "--detailed-exitcode").returncode == 0
