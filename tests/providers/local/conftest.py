"""Fixtures for the local provider's job tests: a configured provider under tmp_path, queues
and quotas applied as normalized documents, launches with small defaults, and waiting.

Jobs are real processes. The `local` fixture kills whatever is still running at the end
of a test (supervisors and job process groups it can verify), so no test leaks processes.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from trainform.providers.base import DesiredResource, ProviderContext
from trainform.providers.jobs import JobLaunch, RunStatus
from trainform.providers.local.machine import MachineFacts
from trainform.providers.local.processes import is_job_process, supervisor_alive
from trainform.providers.local.provider import LocalProvider

GiB = 2**30
MiB = 2**20
ADDRESS = "TrainingJob/research/job"
T = TypeVar("T")


def sleeper(seconds: float) -> list[str]:
    return [sys.executable, "-c", f"import time; time.sleep({seconds})"]


@pytest.fixture
def spec_root(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    root.mkdir()
    return root


@pytest.fixture
def local(spec_root: Path) -> Iterator[LocalProvider]:
    provider = LocalProvider(MachineFacts(cpus=4, memory_bytes=8 * GiB, gpus=()))
    provider.configure("local", None, ProviderContext(spec_root=spec_root))
    yield provider
    for attempt in provider.jobs.store.running():
        if supervisor_alive(attempt.supervisor_pid, attempt.id):
            os.kill(attempt.supervisor_pid or 0, signal.SIGKILL)
        if is_job_process(attempt.child_pid, attempt.address, attempt.run_id, attempt.attempt):
            os.killpg(attempt.child_pid or 0, signal.SIGKILL)
    provider.close()


def add_queue(
    provider: LocalProvider,
    name: str = "default-queue",
    cpu: str | None = "2",
    memory: str | None = str(4 * GiB),
    gpu: str | None = None,
    strategy: str = "BestEffortFIFO",
    max_runtime: str | None = None,
) -> None:
    """Apply a Queue as its normalized document (one pool, this machine)."""
    spec = {
        "pools": [
            {
                "pool": "this-machine",
                "nominalQuota": {"gpu": gpu, "cpu": cpu, "memory": memory},
                "borrowingLimit": None,
                "lendingLimit": None,
            }
        ],
        "cohort": None,
        "defaultPriority": 100,
        "queueingStrategy": strategy,
        "maxRuntime": max_runtime,
        "stopPolicy": "None",
    }
    document = {"metadata": {"labels": {}, "annotations": {}}, "spec": spec}
    provider.create(DesiredResource(f"Queue/{name}", "Queue", name, None, document))


def add_quota(
    provider: LocalProvider, queue: str = "default-queue", project: str = "research", **limits: Any
) -> None:
    """Apply a Quota of `project` on `queue`; limits by their document names."""
    values = {"gpu": None, "cpu": None, "memory": None, "runningJobs": None, "maxWallTime": None}
    values.update(limits)
    name = f"{project}-{queue}"
    document = {
        "metadata": {"labels": {}, "annotations": {}},
        "spec": {"queue": queue, "limits": values},
    }
    provider.create(DesiredResource(f"Quota/{project}/{name}", "Quota", name, project, document))


def launch(**overrides: Any) -> JobLaunch:
    """A small training launch: one CPU, 512Mi, a job that exits at once."""
    values: dict[str, Any] = {
        "address": ADDRESS,
        "run_id": "r-1",
        "attempt": 1,
        "kind": "train",
        "project": "research",
        "queue": "default-queue",
        "priority": 100,
        "command": [sys.executable, "-c", "pass"],
        "code_dir": None,
        "parameters": {},
        "env": {},
        "datasets": [],
        "cpu": "1",
        "memory": str(512 * MiB),
        "gpus": 0,
        "nodes": 1,
    }
    values.update(overrides)
    return JobLaunch(**values)


def wait_for(check: Callable[[], T | None], timeout: float = 10.0, what: str = "") -> T:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.05)


def run_of(provider: LocalProvider, run_id: str = "r-1", address: str = ADDRESS) -> RunStatus:
    return next(run for run in provider.runs(address) if run.run_id == run_id)


def finished(provider: LocalProvider, run_id: str = "r-1", address: str = ADDRESS) -> RunStatus:
    """Wait until the run's latest attempt finished; the run's status then."""

    def check() -> RunStatus | None:
        run = run_of(provider, run_id, address)
        return run if run.latest and run.latest.phase.finished else None

    return wait_for(check, what=f"run {run_id} to finish")
