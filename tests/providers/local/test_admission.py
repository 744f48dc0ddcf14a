"""Admission decisions on the local platform, without running anything: capacity of queues
and quotas, the reasons a waiting attempt shows, runtime caps and run folders."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.local.admission import Platform, duration_seconds
from trainform.providers.local.capacity import free_devices, show
from trainform.providers.local.layout import RunLayout
from trainform.providers.local.runs import Attempt

GiB = 2**30


def attempt(cpu: str = "1", memory: int = GiB, gpus: int = 0, **more: Any) -> Attempt:
    values: dict[str, Any] = {
        "id": "a",
        "address": "TrainingJob/research/job",
        "run_id": "r-1",
        "attempt": 1,
        "kind": "train",
        "queue": "q",
        "cpu": cpu,
        "memory": str(memory),
        "gpus": gpus,
        "phase": "queued",
        "launch": {},
        "workdir": "/tmp/w",
        "checkpoint_dir": "/tmp/c",
        "output_dir": "/tmp/o",
        "log_path": "/tmp/l",
        "submitted_at": "",
        "manager": "trainform",
        "project": "research",
    }
    values.update(more)
    return Attempt(**values)


def platform(running: list[Attempt], quota: dict[str, Any] | None = None, **queue: Any) -> Platform:
    nominal = {"cpu": "2", "memory": str(4 * GiB), "gpu": None} | queue.pop("nominal", {})
    spec = {"pools": [{"pool": "p", "nominalQuota": nominal}], "stopPolicy": "None"} | queue
    quotas = []
    if quota is not None:
        document = {"spec": {"queue": "q", "limits": quota}}
        quotas.append(("Quota/research/research-q", "research", document))
    return Platform({"q": spec}, quotas, running)


@pytest.mark.parametrize(
    ("running", "need", "queue", "quota", "reason"),
    [
        pytest.param([], attempt(), {}, None, "", id="fits"),
        pytest.param(
            [attempt(cpu="1.5")],
            attempt(),
            {},
            None,
            "queue q: cpu 1.5/2 in use by 1 job (needs 1)",
            id="cpu-in-use",
        ),
        pytest.param(
            [attempt(cpu="0.5", memory=3 * GiB), attempt(cpu="0.5", memory=0)],
            attempt(memory=2 * GiB),
            {},
            None,
            "queue q: memory 3Gi/4Gi in use by 2 jobs (needs 2Gi)",
            id="memory-in-use",
        ),
        pytest.param(
            [],
            attempt(gpus=1),
            {},
            None,
            "queue q: needs gpu 1, more than its nominal quota of 0 "
            "(it cannot start until that changes)",
            id="no-gpu-on-the-queue",
        ),
        pytest.param(
            [],
            attempt(),
            {"stopPolicy": "Hold"},
            None,
            "queue q is on hold (stopPolicy Hold)",
            id="held-queue",
        ),
        pytest.param(
            [attempt(cpu="0.5")],
            attempt(cpu="0.5"),
            {},
            {"cpu": "0.5", "memory": None, "gpu": None, "runningJobs": None},
            "project research quota on q: cpu 0.5/0.5 in use by 1 job (needs 0.5)",
            id="quota-cpu",
        ),
        pytest.param(
            [attempt(cpu="0.1"), attempt(cpu="0.1", project="other")],
            attempt(cpu="0.1"),
            {},
            {"cpu": None, "memory": None, "gpu": None, "runningJobs": 1},
            "project research quota on q: runningJobs 1/1",
            id="quota-running-jobs-counts-only-the-project",
        ),
        pytest.param(
            [attempt(cpu="0.1", project="other")],
            attempt(cpu="0.1"),
            {},
            {"cpu": None, "memory": None, "gpu": None, "runningJobs": 1},
            "",
            id="another-projects-job-does-not-count",
        ),
    ],
)
def test_why_an_attempt_waits(
    running: list[Attempt],
    need: Attempt,
    queue: dict[str, Any],
    quota: dict[str, Any] | None,
    reason: str,
) -> None:
    assert platform(running, quota, **queue).why_waiting(need) == reason


def test_an_attempt_on_a_missing_queue_waits_for_it() -> None:
    assert Platform({}, [], []).why_waiting(attempt(queue="gone")) == "queue gone is not applied"


def test_the_shortest_of_job_queue_and_quota_runtimes_applies() -> None:
    quota = {"maxWallTime": "1h"}
    limits = platform([], quota, maxRuntime="2h")

    assert limits.max_runtime(attempt(launch={"max_runtime": 9000})) == 3600
    assert limits.max_runtime(attempt(launch={"max_runtime": 60})) == 60
    assert platform([]).max_runtime(attempt()) is None
    assert duration_seconds("1h30m") == 5400 and duration_seconds(None) is None


def test_gpus_are_assigned_lowest_free_index_first() -> None:
    running = [attempt(devices="0,2")]

    assert free_devices(running, 2) == "1,3"
    assert free_devices(running, 0) == ""


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [("memory", 512 * 2**20, "512Mi"), ("memory", 1000, "1000"), ("cpu", 2, "2")],
)
def test_amounts_read_as_people_write_them(resource: str, amount: int, text: str) -> None:
    assert show(resource, Decimal(amount)) == text


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        pytest.param("", "/root/checkpoints/research/job/r-1", id="default"),
        pytest.param("ckpt/team", "/root/ckpt/team/r-1", id="relative-to-the-root"),
        pytest.param("/mnt/fast", "/mnt/fast/r-1", id="absolute"),
        pytest.param("file:///mnt/fast", "/mnt/fast/r-1", id="file-uri"),
    ],
)
def test_each_run_has_its_own_checkpoint_folder(prefix: str, expected: str) -> None:
    layout = RunLayout(Path("/root"), "TrainingJob/research/job", "r-1", prefix)

    assert layout.checkpoint_dir == Path(expected)
    assert layout.run_dir == Path("/root/runs/research/job/r-1")
    assert RunLayout(Path("/r"), "TrainingJob/job", "r-2").run_dir == Path(
        "/r/runs/_global/job/r-2"
    )
