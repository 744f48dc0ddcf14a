"""Smoke tests of the Slurm test cluster (tests/services/slurm.py): what the Slurm provider
relies on works on it — GPU jobs run, the JSON outputs parse, accounting enforces
association limits, and partitions written to the include file appear on reconfigure."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.services.slurm import SlurmCluster

WRAP = 'echo "gpus=$CUDA_VISIBLE_DEVICES"'


def ok(cluster: SlurmCluster, *argv: str) -> str:
    result = cluster.run(argv)
    assert result.returncode == 0, f"{' '.join(argv)}: {result.stderr}\n{cluster.log_tail()}"
    return result.stdout


def submit(cluster: SlurmCluster, name: str, *options: str) -> int:
    output = cluster.job_root / f"{name}.out"
    stdout = ok(cluster, "sbatch", "--parsable", "-o", str(output), "-J", name, *options)
    return int(stdout.strip().split(";")[0])


def poll(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def squeue_job(cluster: SlurmCluster, job_id: int) -> dict[str, Any] | None:
    jobs = json.loads(ok(cluster, "squeue", "--json"))["jobs"]
    return next((job for job in jobs if job["job_id"] == job_id), None)


def sacct_job(cluster: SlurmCluster, job_id: int) -> dict[str, Any] | None:
    jobs = json.loads(ok(cluster, "sacct", "--json", "-j", str(job_id)))["jobs"]
    return next((job for job in jobs if job["job_id"] == job_id), None)


def test_gpu_job_runs_to_completion(slurm_cluster: SlurmCluster) -> None:
    job_id = submit(
        slurm_cluster, "smoke", "--gres=gpu:2", "--comment", "trainform-smoke", "--wrap", WRAP
    )

    def finished() -> dict[str, Any] | None:
        job = sacct_job(slurm_cluster, job_id)
        # Accounting lags: right after the end, sacct has the state but not yet the
        # partition and QOS (the job's start record reaches slurmdbd later).
        done = job is not None and job["state"]["current"] == "COMPLETED" and job["partition"]
        return job if done else None

    job = poll(finished)
    assert job, f"job {job_id} did not complete: {sacct_job(slurm_cluster, job_id)}"
    assert job["partition"] == "debug"
    assert job["comment"]["job"] == "trainform-smoke"
    assert job["exit_code"]["return_code"] == 0
    assert (slurm_cluster.job_root / "smoke.out").read_text() == "gpus=0,1\n"
    assert slurm_cluster.env() == {"SLURM_CONF": str(slurm_cluster.conf)}


def test_squeue_json_lists_jobs(slurm_cluster: SlurmCluster) -> None:
    document = json.loads(ok(slurm_cluster, "squeue", "--json"))
    assert document["meta"]["Slurm"]["release"].startswith("22.05")
    assert isinstance(document["jobs"], list)


def test_association_gpu_limit_keeps_job_pending(slurm_cluster: SlurmCluster) -> None:
    ok(slurm_cluster, "sacctmgr", "-i", "add", "account", "smoke-limited")
    ok(slurm_cluster, "sacctmgr", "-i", "add", "user", "root", "account=smoke-limited")
    ok(
        slurm_cluster,
        "sacctmgr",
        "-i",
        "modify",
        "account",
        "where",
        "name=smoke-limited",
        "set",
        "GrpTRES=gres/gpu=2",
    )
    ok(slurm_cluster, "sacctmgr", "-i", "add", "qos", "smoke-qos")
    ok(
        slurm_cluster,
        "sacctmgr",
        "-i",
        "modify",
        "qos",
        "where",
        "name=smoke-qos",
        "set",
        "GrpTRES=gres/gpu=2",
    )
    qos = ok(
        slurm_cluster,
        "sacctmgr",
        "-nP",
        "show",
        "qos",
        "where",
        "name=smoke-qos",
        "format=name,grptres",
    )
    assert qos.strip() == "smoke-qos|gres/gpu=2"

    job_id = submit(slurm_cluster, "limited", "-A", "smoke-limited", "--gres=gpu:4", "--wrap", WRAP)
    try:

        def reason() -> str | None:
            job = squeue_job(slurm_cluster, job_id)
            return job["state_reason"] if job and job["state_reason"] != "None" else None

        assert poll(reason, timeout=15) == "AssocGrpGRES"
        job = squeue_job(slurm_cluster, job_id)
        assert job is not None and job["job_state"] == "PENDING"
        assert job["account"] == "smoke-limited"
    finally:
        ok(slurm_cluster, "scancel", str(job_id))


def test_partition_from_include_file_appears_on_reconfigure(
    slurm_cluster: SlurmCluster,
) -> None:
    original = slurm_cluster.partitions_file.read_text()
    slurm_cluster.partitions_file.write_text(
        original + f"PartitionName=smoke Nodes={slurm_cluster.node_name} State=UP\n"
    )
    try:
        ok(slurm_cluster, "scontrol", "reconfigure")
        partitions = poll(lambda: "smoke" in ok(slurm_cluster, "sinfo", "-h", "-o", "%R").split())
        assert partitions
    finally:
        slurm_cluster.partitions_file.write_text(original)
        ok(slurm_cluster, "scontrol", "reconfigure")
    assert poll(lambda: "smoke" not in ok(slurm_cluster, "sinfo", "-h", "-o", "%R").split())


@pytest.mark.parametrize("command", [["scontrol", "ping"], ["sacctmgr", "-nP", "show", "cluster"]])
def test_daemons_answer(slurm_cluster: SlurmCluster, command: list[str]) -> None:
    assert ok(slurm_cluster, *command).strip()
