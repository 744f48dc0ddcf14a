"""Ctrl-C during apply: calls in flight finish, nothing new starts, state is saved."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.engine.support import QUICKSTART, copy_example

SCRIPT = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from trainform.planner.apply import apply_plan
from trainform.planner.plan import make_plan
from trainform.planner.session import ProviderSet
from trainform.planner.workspace import open_workspace
from trainform.providers.local.provider import LocalProvider

class Slow(LocalProvider):
    def create(self, resource):
        print("create", resource.address, flush=True)
        time.sleep(0.6)
        return super().create(resource)

workspace = open_workspace(sys.argv[1])
providers = ProviderSet(workspace.config, workspace.root, {"local": Slow})
plan = make_plan(workspace.specs, workspace.backend.read(), providers)
lock = workspace.backend.lock("apply")
try:
    result = apply_plan(plan, workspace.backend, providers, parallelism=2)
finally:
    workspace.backend.unlock(lock)
    providers.close()
print("RESULT", result.interrupted, *[f"{o.address}={o.status.name}" for o in result.outcomes])
sys.exit(130 if result.interrupted else 0)
"""


def test_interrupted_apply_finishes_in_flight_calls_and_saves_state(tmp_path: Path) -> None:
    folder = copy_example(QUICKSTART, tmp_path / "quickstart")
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    started = 0
    for line in process.stdout:
        started += line.startswith("create")
        if started == 3:
            break
    time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 130
    result = next(line for line in output.splitlines() if line.startswith("RESULT"))
    statuses = dict(item.split("=") for item in result.split()[2:])
    assert "NOT_STARTED" in statuses.values()
    applied = sorted(a for a, s in statuses.items() if s == "APPLIED")
    assert applied, "calls in flight when Ctrl-C came must finish"
    state = json.loads((folder / ".trainform" / "state.json").read_text())
    assert sorted(state["resources"]) == applied
    assert not (folder / ".trainform" / "state.json.lock").exists()
