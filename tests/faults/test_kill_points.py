"""Killed at every journal line, stopped at random points of a long apply: nothing is lost.

`SIGKILL` cannot be handled, so the journal must carry every finished change: the apply
runs in a child whose backend kills the process right after its n-th journal entry is
durable, for every n; then the lock is released by id, apply runs again, and a refreshed
plan must be empty (state matches the platform). `SIGTERM` lands at random points of a
600-change apply: exit 143, no lock left, and applying again converges.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from trainform.planner.backends.local import LocalBackend

from tests.helpers import CONFIG, REPO, run_cli, write_tree

KILL_AFTER = """
import os, signal, sys
from trainform.planner.backends.local import LocalBackend

original = LocalBackend.record
count = [0]

def record(self, state, entry):
    original(self, state, entry)
    count[0] += 1
    if count[0] == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)

LocalBackend.record = record
from trainform.cli import main
main(["apply", sys.argv[1], "--auto-approve", "--parallelism", "2"])
"""

APPLY = """
import sys
from trainform.cli import main
main(["apply", sys.argv[1], "--auto-approve"])
"""


def projects(count: int) -> str:
    return "---\n".join(
        f"apiVersion: trainform/v1\nkind: Project\nmetadata: {{name: team-{n}}}\n"
        "spec: {owners: [a@example.com]}\n"
        for n in range(count)
    )


def child(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )


def converges(root: Path, count: int) -> None:
    lock = root / ".trainform" / "state.json.lock"
    if lock.exists():
        lock_id = json.loads(lock.read_text())["id"]
        assert run_cli("force-unlock", lock_id, str(root)).returncode == 0
    again = run_cli("apply", str(root), "--auto-approve")
    assert again.returncode == 0, again.stdout + again.stderr
    settled = run_cli("plan", str(root), "--detailed-exitcode")
    assert settled.returncode == 0, settled.stdout + settled.stderr
    state = LocalBackend(root / ".trainform" / "state.json").read()  # journal replayed
    assert state is not None
    assert sorted(state.resources) == sorted(f"Project/team-{n}" for n in range(count))


@pytest.mark.parametrize("line", range(1, 9))
def test_sigkill_after_any_journal_line_loses_nothing(tmp_path: Path, line: int) -> None:
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG, "projects.yaml": projects(4)})

    process = child(KILL_AFTER, str(root), str(line))
    process.communicate(timeout=60)

    assert process.returncode == -signal.SIGKILL
    assert (root / ".trainform" / "state.json.journal").exists()
    converges(root, 4)


def test_sigterm_at_random_points_of_a_600_change_apply_converges(tmp_path: Path) -> None:
    chooser = random.Random(13)
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG, "projects.yaml": projects(600)})
    interrupted = 0
    for _ in range(2):
        stop_after = chooser.randrange(20, 200)
        process = child(APPLY, str(root))
        assert process.stdout is not None
        completed = 0
        for line in process.stdout:
            completed += "complete after" in line
            if completed == stop_after:
                process.send_signal(signal.SIGTERM)
                break
        stdout, stderr = process.communicate(timeout=120)
        if completed < stop_after:
            break  # the apply finished first: nothing left to interrupt
        assert process.returncode == 143, stdout + stderr
        assert not (root / ".trainform" / "state.json.lock").exists()
        assert not (root / ".trainform" / "state.json.journal").exists()
        interrupted += 1
    assert interrupted >= 1
    converges(root, 600)
