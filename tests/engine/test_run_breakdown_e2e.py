"""Acceptance: the quickstart job reports where its time went, and `status` shows it.

The quickstart (environment `ci`: 20 steps of 0.05 s, a checkpoint every 5) runs through
the CLI with this interpreter's bin folder first on the PATH its jobs inherit, so its
`python3` imports trainform.runtime. The run's attempt reports set-up, data wait, compute
and its checkpoint writes; `status --describe` prints the breakdown and JSON carries it;
the evaluation's events sit beside its log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.support import QUICKSTART, copy_example
from tests.helpers import TRAINFORM

pytestmark = pytest.mark.slow


def cli(folder: Path, *args: str) -> str:
    environment = {
        **os.environ,
        "NO_COLOR": "1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }
    result = subprocess.run(
        [str(TRAINFORM), *args],
        cwd=folder,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_quickstart_reports_where_its_time_went(tmp_path: Path) -> None:
    folder = copy_example(QUICKSTART, tmp_path / "quickstart", jobs=True)
    cli(folder, "lock", ".", "--env", "ci")
    cli(folder, "apply", ".", "--env", "ci", "--auto-approve")
    try:
        cli(folder, "status", "--dir", ".", "--env", "ci", "--wait", "--timeout", "120")
        cli(folder, "apply", ".", "--env", "ci", "--auto-approve")  # the evaluation
        cli(folder, "status", "--dir", ".", "--env", "ci", "--wait", "--timeout", "120")
        text = cli(folder, "status", "--dir", ".", "--env", "ci", "--describe")
        data = cli(folder, "status", "--dir", ".", "--env", "ci", "--format", "json")
    except BaseException:  # whatever still runs of this folder's platform
        subprocess.run(
            [str(TRAINFORM), "destroy", ".", "--env", "ci", "--auto-approve"],
            cwd=folder, capture_output=True, check=False, timeout=120,
        )  # fmt: skip
        raise
    [job] = json.loads(data)["jobs"]
    assert job["phase"] == "succeeded" and job["evaluations"][0]["gate"] == "pass"
    [attempt] = job["attempts"]
    breakdown = attempt["breakdown"]
    assert breakdown["source"] == "events" and breakdown["events"]["ranks"] == 1
    assert breakdown["events"]["ignoredLines"] == 0 and breakdown["events"]["openPhases"] == []
    assert breakdown["checkpoints"] == 4 and breakdown["checkpointBytes"] > 0
    # 20 steps that each sleep 0.05 s: compute holds at least that, and the largest share
    assert breakdown["computeSeconds"] >= 1.0
    assert breakdown["shares"]["compute"] == max(breakdown["shares"].values())
    assert breakdown["setupSeconds"] > 0 and breakdown["checkpointSeconds"] > 0
    assert breakdown["dataWaitSeconds"] is not None  # slicing a string: next to nothing
    assert sum(breakdown["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert job["delivery"]["breakdown"]["computeSeconds"] == breakdown["computeSeconds"]

    [line] = [line for line in text.splitlines() if line.strip().startswith("time:")]
    assert "setup " in line and "compute " in line
    assert "checkpoint " in line and "for 4 writes" in line
    assert line.endswith("(from the job's run events)")
    assert any(line.startswith("  time spent:  ") for line in text.splitlines())

    log = Path(attempt["log"])
    assert log.with_name("attempt-1.events.jsonl").is_file()
    [evaluation_events] = (log.parent.parent / "evaluations").glob("*/attempt-1.events.jsonl")
    phases = {json.loads(line)["phase"] for line in evaluation_events.read_text().splitlines()}
    assert phases == {"setup", "eval"}
