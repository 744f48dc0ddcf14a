"""The local provider gives every attempt an events file beside its log (through
TRAINFORM_EVENTS_FILE) and reports what the job wrote there with the attempt; a job that
wrote nothing reports none. The job here writes the protocol's lines by hand, as code
without trainform installed would (docs/run-events.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from trainform.planner.run_breakdown import run_breakdown
from trainform.providers.local.provider import LocalProvider

from tests.providers.local.conftest import add_queue, add_quota, finished, launch

HAND_WRITTEN = """
import json, os, time
path = os.environ["TRAINFORM_EVENTS_FILE"]
time.sleep(0.3)
now = time.time()
with open(path, "a") as events:
    events.write(json.dumps({"v": 1, "t": now, "event": "span", "phase": "data_wait",
                             "seconds": 0.1, "count": 5, "since": now - 0.25}) + "\\n")
    events.write(json.dumps({"v": 1, "t": now, "event": "span", "phase": "compute",
                             "seconds": 0.15, "count": 5, "step": 5}) + "\\n")
    events.write('{"v": 1, "t": ')  # torn: the job died mid-line
"""


def test_an_attempt_reports_the_events_its_job_wrote_beside_its_log(local: LocalProvider) -> None:
    add_queue(local)
    add_quota(local)
    local.submit(launch(command=[sys.executable, "-c", HAND_WRITTEN]))
    [attempt] = finished(local).attempts
    assert Path(attempt.log).with_name("attempt-1.events.jsonl").is_file()
    assert attempt.events is not None
    assert (attempt.events["ranks"], attempt.events["ignored"]) == (1, 1)
    assert attempt.events["lastStep"] == 5
    assert attempt.events["phases"]["data_wait"] == {"seconds": 0.1, "count": 5, "bytes": 0}
    [breakdown] = run_breakdown(finished(local)).attempts
    assert breakdown.source == "events"
    assert breakdown.seconds["dataWait"] == 0.1 and breakdown.seconds["compute"] == 0.15


def test_an_attempt_whose_job_wrote_nothing_reports_no_events(local: LocalProvider) -> None:
    add_queue(local)
    add_quota(local)
    local.submit(launch())
    [attempt] = finished(local).attempts
    assert attempt.events is None
    [breakdown] = run_breakdown(finished(local)).attempts
    assert breakdown.source == "provider" and breakdown.seconds["unaccounted"] == breakdown.ran
