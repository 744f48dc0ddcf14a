"""Golden files for what `status`, `lineage` and `usage` print about runs.

One fixed history (tests/golden/runs/): a run whose first attempt waited on its quota, ran,
wrote checkpoints and lost its node; whose second waited out its retry backoff, resumed
and was preempted; whose third resumed and succeeded and was evaluated; plus an earlier
run of the same job. Rendered through the same functions the commands use, at a fixed
`now`. `pytest --update-golden` rewrites the files; review the diff.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pytest
from trainform.cli.render.status_table import render_status_table
from trainform.cli.render.status_text import render_status_json, render_status_text
from trainform.cli.runs import render_lineage_text, render_usage
from trainform.planner.desired import DesiredItem
from trainform.planner.jobs import JobContext
from trainform.planner.lineage import Lineage
from trainform.planner.lockfile import LockFile
from trainform.planner.status import job_report
from trainform.planner.timeline import attempt_timelines, delivery
from trainform.planner.usage import compute_usage
from trainform.providers.jobs import (
    AccountedRun,
    AttemptStatus,
    CheckpointStatus,
    EvaluationStatus,
    RunPhase,
    RunSpan,
    RunStatus,
    WaitSpan,
)

from tests.test_golden import check_golden

GOLDEN = Path(__file__).parent / "golden" / "runs"
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
JOB = "TrainingJob/research/bigram"
SUITE = "EvalSuite/research/heldout"


def _checkpoint(step: int, written: str) -> CheckpointStatus:
    return CheckpointStatus(
        id=f"step-{step:06d}",
        step=step,
        valid=True,
        path=f"/platform/runs/bigram/r-00000000000a/checkpoints/step-{step:06d}",
        written_at=written,
        size=4096 * step,
    )


def history_run() -> RunStatus:
    return RunStatus(
        run_id="r-0000000000e0",
        attempts=[
            AttemptStatus(
                attempt=1,
                phase=RunPhase.SUCCEEDED,
                cause="succeeded",
                exit_code=0,
                submitted_at="2026-11-30T08:00:00.000Z",
                admitted_at="2026-11-30T08:00:01.000Z",
                started_at="2026-11-30T08:00:01.000Z",
                ended_at="2026-11-30T09:00:01.000Z",
                queue="default-queue",
                gpus=1,
                cpus=2.0,
                last_step=100,
                runs=[  # preempted at step 40, held 2m01s, resumed from step 30
                    RunSpan(
                        "2026-11-30T08:00:01.000Z",
                        "2026-11-30T08:20:01.000Z",
                        "preempted",
                        1200,
                        1,
                        2.0,
                        last_step=40,
                    ),
                    RunSpan(
                        "2026-11-30T08:22:02.000Z",
                        "2026-11-30T09:00:01.000Z",
                        "",
                        2279,
                        1,
                        2.0,
                        resumed_step=30,
                        last_step=100,
                    ),
                ],
            )
        ],
        checkpoints=[_checkpoint(30, "2026-11-30T08:15:01.000Z")],
    )


def _events(first: str) -> dict:
    """What the attempt's job reported (providers/run_events.py `summarize_events`): two
    ranks, one unreadable line."""
    phases = {"setup": 40.0, "data_wait": 300.0, "compute": 1000.0, "checkpoint": 30.0}
    return {
        "formatVersion": 1,
        "records": 40,
        "ignored": 1,
        "truncated": False,
        "ranks": 2,
        "firstAt": datetime.fromisoformat(first).timestamp(),
        "lastAt": datetime.fromisoformat("2026-12-01T11:29:50.000Z").timestamp(),
        "lastStep": 80,
        "phases": {
            name: {"seconds": seconds, "count": 1, "bytes": 2**20 if name == "checkpoint" else 0}
            for name, seconds in {**phases, "eval": 60.0}.items()
        },
        "open": {},
    }


def current_run() -> RunStatus:
    attempts = [
        AttemptStatus(
            attempt=1,
            phase=RunPhase.FAILED,
            cause="node-failure",
            reason="supervisor exited without recording an outcome (killed?)",
            submitted_at="2026-12-01T10:00:00.000Z",
            admitted_at="2026-12-01T10:05:00.000Z",
            started_at="2026-12-01T10:05:00.000Z",
            ended_at="2026-12-01T10:35:00.000Z",
            waits=[
                WaitSpan(
                    "project research quota on default-queue: gpu 1/1 in use",
                    "2026-12-01T10:00:00.000Z",
                    "2026-12-01T10:05:00.000Z",
                )
            ],
            queue="default-queue",
            gpus=2,
            cpus=8.0,
            hosts=["gpu-node-1"],
            last_step=35,
            log="/platform/runs/bigram/r-00000000000a/attempt-1.log",
        ),
        AttemptStatus(
            attempt=2,
            phase=RunPhase.FAILED,
            cause="preempted",
            reason="preempted by a higher-priority workload",
            submitted_at="2026-12-01T10:35:00.000Z",
            eligible_at="2026-12-01T10:37:00.000Z",
            admitted_at="2026-12-01T10:37:30.000Z",
            started_at="2026-12-01T10:37:30.000Z",
            ended_at="2026-12-01T11:00:00.000Z",
            resumed_from="step-000030",
            queue="default-queue",
            gpus=2,
            cpus=8.0,
            hosts=["gpu-node-2"],
            last_step=52,
        ),
        AttemptStatus(
            attempt=3,
            phase=RunPhase.SUCCEEDED,
            cause="succeeded",
            exit_code=0,
            submitted_at="2026-12-01T11:00:00.000Z",
            eligible_at="2026-12-01T11:04:00.000Z",
            admitted_at="2026-12-01T11:04:00.000Z",
            started_at="2026-12-01T11:04:00.000Z",
            ended_at="2026-12-01T11:30:00.000Z",
            resumed_from="step-000050",
            queue="default-queue",
            gpus=2,
            cpus=8.0,
            hosts=["gpu-node-1"],
            last_step=80,
            events=_events("2026-12-01T11:04:20.000Z"),
        ),
    ]
    checkpoints = [
        _checkpoint(10, "2026-12-01T10:12:00.000Z"),
        _checkpoint(20, "2026-12-01T10:20:00.000Z"),
        _checkpoint(30, "2026-12-01T10:29:00.000Z"),
        _checkpoint(40, "2026-12-01T10:45:00.000Z"),
        _checkpoint(50, "2026-12-01T10:55:00.000Z"),
        _checkpoint(80, "2026-12-01T11:29:30.000Z"),
    ]
    return RunStatus(
        run_id="r-00000000000a",
        attempts=attempts,
        checkpoints=checkpoints,
        current_step=80,
        evaluations=[
            EvaluationStatus(SUITE, "r-00000000000a", RunPhase.SUCCEEDED, {"perplexity": 7.25})
        ],
        output_dir="/platform/runs/bigram/r-00000000000a/output",
    )


def _run_json(run: RunStatus) -> dict:
    data = asdict(run)
    for entry in data["attempts"] + data["evaluations"]:
        entry["phase"] = str(entry["phase"])
    return data


def _items() -> dict[str, DesiredItem]:
    suite = DesiredItem(
        SUITE,
        "EvalSuite",
        "heldout",
        "research",
        ["local"],
        {"spec": {"gates": [{"metric": "perplexity", "op": "<=", "threshold": 8}]}},
        "h",
        [],
        False,
        "specs/eval.yaml:1",
    )
    job = DesiredItem(
        JOB,
        "TrainingJob",
        "bigram",
        "research",
        ["local"],
        {"spec": {}},
        "h",
        [SUITE],
        False,
        "specs/job.yaml:1",
        references=[("spec.evaluations[0].suite", SUITE, None)],
    )
    return {SUITE: suite, JOB: job}


def _status_report():
    items = _items()
    runs = [_run_json(history_run()), _run_json(current_run())]
    context = JobContext(items, LockFile(), Path("."), lambda _: runs)
    return job_report(items[JOB], "r-00000000000a", runs, context, NOW)


@pytest.mark.parametrize(
    "name", ["status.txt", "status-table.txt", "status.json", "lineage.txt", "lineage.json"]
)
def test_status_and_lineage_match_golden(name: str, update_golden: bool) -> None:
    if name.startswith("status"):
        report = _status_report()
        if name.endswith("json"):
            text = render_status_json([report])
        elif name == "status-table.txt":
            text = render_status_table([report])
        else:
            text = render_status_text([report])
    else:
        recorded = {
            "inputs": {
                "image": {"image": "Image/host-python", "digest": "sha256:" + "1" * 64},
                "datasets": [
                    {"dataset": "Dataset/tiny-corpus@v1", "manifestDigest": "sha256:" + "2" * 64}
                ],
                "code": {"location": "code#.", "contentDigest": "sha256:" + "3" * 64},
                "command": ["python", "train.py"],
                "parameters": {"lr": 0.01, "token": "(sensitive:abcd)"},
                "resources": {
                    "nodes": 1,
                    "acceleratorsPerNode": 2,
                    "cpu": "8",
                    "memory": "68719476736",
                },
            },
            "specCommit": "0123456789abcdef0123456789abcdef01234567",
            "specDigest": "sha256:" + "4" * 64,
            "lockDigest": "sha256:" + "5" * 64,
            "environment": "prod",
            "initFrom": {"job": "TrainingJob/research/base", "checkpoint": "latest",
                         "runId": "r-0000000000b0"},
        }  # fmt: skip
        parent = Lineage(
            "TrainingJob/research/base",
            "r-0000000000b0",
            {"inputs": {"command": ["python", "pretrain.py"]}, "specCommit": "f" * 40},
            _run_json(history_run()),
        )
        lineage = Lineage(JOB, "r-00000000000a", recorded, _run_json(current_run()), parent=parent)
        lineage.evaluations = _report_evaluations()
        if name.endswith("json"):
            text = json.dumps({"lineage": lineage.to_json()}, indent=2, sort_keys=True) + "\n"
        else:
            text = render_lineage_text(lineage)
    check_golden(GOLDEN / name, text, update_golden)


def _report_evaluations() -> list[dict]:
    from trainform.planner.lineage import _evaluations

    return _evaluations(_run_json(current_run()), _items())


@pytest.mark.parametrize("name", ["usage.txt", "usage.csv", "usage.json", "usage.md"])
def test_usage_matches_golden(name: str, update_golden: bool) -> None:
    runs = [
        AccountedRun(JOB, "research", "default-queue", current_run()),
        AccountedRun("TrainingJob/vision/resnet", "vision", "default-queue", history_run()),
    ]
    window = (datetime(2026, 11, 30, 8, 30, tzinfo=UTC), NOW)
    report = compute_usage(runs, window, "project")
    report.sources = ["local"]
    fmt = {"txt": "text", "csv": "csv", "json": "json", "md": "markdown"}[name.split(".")[1]]
    check_golden(GOLDEN / name, render_usage(report, fmt), update_golden)


def test_delivery_cycle_of_the_fixed_history() -> None:
    timelines = attempt_timelines(current_run(), NOW)
    assert [t.lost_steps for t in timelines] == [None, 5, 2]
    # attempt 1 ran 5 min past step-30 (10:29 -> 10:35); attempt 2 5 min past step-50
    assert [t.lost_seconds for t in timelines] == [None, 360.0, 300.0]
    assert [t.waited for t in timelines] == [300.0, 30.0, 0.0]
    assert [t.backoff for t in timelines] == [None, 120.0, 240.0]
    cycle = delivery(timelines)
    assert cycle.ran == 1800 + 1350 + 1560
    assert cycle.rerun == 660.0
    assert cycle.effective == cycle.ran - 660.0
    assert cycle.lost_steps == 7
