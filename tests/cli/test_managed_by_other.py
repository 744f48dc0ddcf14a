"""A local platform row another manager took over reads as managed-by-other, never as
missing: plan refuses to create it (exit 1, naming the manager, the spec location and the
import command that adopts it), drift reports it as its own kind with that remedy, and
the printed import command works as printed."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path

from tests.engine.support import QUICKSTART, copy_example, run_trainform

QUEUE = "Queue/default-queue"


def _take_over(root: Path, address: str, manager: str) -> None:
    with sqlite3.connect(root / ".trainform" / "platform.db") as connection:
        changed = connection.execute(
            "UPDATE objects SET manager = ? WHERE address = ?", (manager, address)
        ).rowcount
    assert changed == 1


def command_of(text: str) -> str:
    return text.split("again run `" if "again run `" in text else "adopt it with `")[1].split("`")[
        0
    ]


def test_a_row_taken_over_by_another_manager_is_managed_by_other(tmp_path: Path) -> None:
    root = copy_example(QUICKSTART, tmp_path / "quickstart")
    applied = run_trainform("apply", ".", "--auto-approve", cwd=root)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    _take_over(root, QUEUE, "admin")

    planned = run_trainform("plan", ".", cwd=root)
    assert planned.returncode == 1, planned.stdout
    message = " ".join(planned.stderr.split())
    assert "specs/platform.yaml:" in message, message
    assert f"cannot create {QUEUE} on local" in message
    assert "managed by 'admin'" in message
    assert "Plan:" not in planned.stdout

    drift = run_trainform("drift", ".", cwd=root)
    assert drift.returncode == 2, drift.stdout + drift.stderr
    report = " ".join(drift.stdout.split())
    assert f"managed-by-other: {QUEUE}" in report, report
    assert "missing" not in report, report
    assert "taken over by 'admin'" in report and command_of(report) == command_of(message)

    command = command_of(message)
    assert command == f"trainform state rm {QUEUE} && trainform import {QUEUE} {QUEUE}"
    for part in command.split(" && "):
        done = run_trainform(*shlex.split(part)[1:], cwd=root)
        assert done.returncode == 0, done.stdout + done.stderr
    after = run_trainform("plan", ".", "--detailed-exitcode", cwd=root)
    assert after.returncode in (0, 2), after.stdout + after.stderr
    assert "managed by 'admin'" not in after.stdout + after.stderr
