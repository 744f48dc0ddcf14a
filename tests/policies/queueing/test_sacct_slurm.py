"""`review --trace-from slurm` reads the real Slurm accounting: jobs run on the test cluster
(tests/services/slurm.py) come back from `sacct --json` as trace jobs."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from policies.review.simulation import read_jobs
from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow


def _ok(cluster: SlurmCluster, *argv: str) -> str:
    result = cluster.run(list(argv))
    assert result.returncode == 0, f"{' '.join(argv)}: {result.stdout}{result.stderr}"
    return str(result.stdout)


def test_jobs_run_on_slurm_are_read_back_as_a_trace(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    accounts = [f"trace-{uuid.uuid4().hex[:6]}", f"trace-{uuid.uuid4().hex[:6]}"]
    try:
        for account in accounts:
            _ok(slurm_cluster, "sacctmgr", "-i", "add", "account", account)
            _ok(slurm_cluster, "sacctmgr", "-i", "add", "user", "root", f"account={account}")
        ids = []
        for index, account in enumerate(accounts * 2):
            output = slurm_cluster.job_root / f"trace-{index}.out"
            ids.append(
                _ok(
                    slurm_cluster,
                    "sbatch",
                    "--parsable",
                    "-o",
                    str(output),
                    f"--account={account}",
                    "--partition=debug",
                    "--gres=gpu:1",
                    "--wrap",
                    "sleep 1",
                )
                .strip()
                .split(";")[0]
            )
        deadline = time.monotonic() + 90
        while True:
            states = _ok(
                slurm_cluster,
                "sacct",
                "-X",
                "-n",
                "-P",
                "-j",
                ",".join(ids),
                "-o",
                "State,Partition",
            ).split()
            if len(states) == len(ids) and all(s == "COMPLETED|debug" for s in states):
                break
            assert time.monotonic() < deadline, f"jobs did not complete: {states}"
            time.sleep(0.5)

        for key, value in slurm_cluster.env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("PATH", f"{slurm_cluster.bin_dir}:{Path('/usr/bin')}")
        jobs = [job for job in read_jobs(None, "slurm") if job.project in accounts]
    finally:
        for account in accounts:
            slurm_cluster.run(["sacctmgr", "-i", "delete", "user", "root", f"account={account}"])
            slurm_cluster.run(["sacctmgr", "-i", "delete", "account", account])

    assert sorted(job.id for job in jobs) == sorted(ids)
    assert {job.project for job in jobs} == set(accounts)
    assert {(job.queue, job.gpus) for job in jobs} == {("debug", 1)}
    assert all(job.duration >= 1 for job in jobs)
    assert min(job.submit for job in jobs) >= 0
