"""Traces from the real Slurm accounting: jobs run on the test cluster (tests/services/slurm.py)
come back from `sacct --json` as trace jobs, and `review --trace-from slurm` reads them
through the provider instance of trainform.yaml."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from trainform.policies.queueing import read_sacct

from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow


def _ok(cluster: SlurmCluster, *argv: str) -> str:
    result = cluster.run(list(argv))
    assert result.returncode == 0, f"{' '.join(argv)}: {result.stdout}{result.stderr}"
    return str(result.stdout)


def test_jobs_run_on_slurm_are_read_back_as_a_trace(
    slurm_cluster: SlurmCluster, tmp_path: Path
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

        output = _ok(slurm_cluster, "sacct", "--json", "--allusers", "--duplicates",
                     "--starttime", "now-1hours")  # fmt: skip
        jobs = [job for job in read_sacct(output) if job.project in accounts]
    finally:
        for account in accounts:
            slurm_cluster.run(["sacctmgr", "-i", "delete", "user", "root", f"account={account}"])
            slurm_cluster.run(["sacctmgr", "-i", "delete", "account", account])

    assert sorted(job.id for job in jobs) == sorted(ids)
    assert {job.project for job in jobs} == set(accounts)
    assert {(job.queue, job.gpus) for job in jobs} == {("debug", 1)}
    assert all(job.duration >= 1 for job in jobs)
    assert min(job.submit for job in jobs) >= 0
    assert all(job.actual_wait is not None and job.actual_wait >= 0 for job in jobs)
    assert all(job.priority is None for job in jobs)


def test_review_trace_from_slurm_reads_the_provider_instance_window_and_actual_waits(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """`trainform review --trace-from slurm` with no SLURM_CONF in the environment: the
    provider instance of trainform.yaml says where Slurm is; the window holds only the jobs
    run here; the actual waits are those sacct records, beside the simulated base."""
    import datetime
    import json
    import os
    import subprocess

    from tests.engine.support import TRAINFORM
    from tests.policies.review.fixture import commit, git

    since = datetime.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    account = f"review-{uuid.uuid4().hex[:6]}"
    _ok(slurm_cluster, "sacctmgr", "-i", "add", "account", account)
    _ok(slurm_cluster, "sacctmgr", "-i", "add", "user", "root", f"account={account}")
    try:
        ids = [
            _ok(slurm_cluster, "sbatch", "--parsable", "-o", "/dev/null", f"--account={account}",
                "--partition=debug", f"--gres=gpu:{gpus}", "--wrap", "sleep 2")
            .strip().split(";")[0]
            for gpus in (4, 4, 2)
        ]  # fmt: skip
        deadline = time.monotonic() + 90
        while True:
            states = _ok(slurm_cluster, "sacct", "-X", "-n", "-P", "-j", ",".join(ids),
                         "-o", "State,Partition").split()  # fmt: skip
            if len(states) == 3 and all(s == "COMPLETED|debug" for s in states):
                break
            assert time.monotonic() < deadline, f"jobs did not complete: {states}"
            time.sleep(0.5)
        waits = _ok(slurm_cluster, "sacct", "-X", "-n", "-P", "-j", ",".join(ids),
                    "-o", "Submit,Start", "--noconvert")  # fmt: skip
        actual = sorted(
            (datetime.datetime.fromisoformat(b) - datetime.datetime.fromisoformat(a)).seconds
            for a, b in (line.split("|") for line in waits.split())
        )
        repo = tmp_path / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        config = (
            "apiVersion: trainform/v1\nproviders:\n  - name: hpc\n    type: slurm\n"
            f"    connection: {{conf: {slurm_cluster.conf}, binDir: {slurm_cluster.bin_dir}}}\n"
        )
        platform = (
            "apiVersion: trainform/v1\nkind: ResourcePool\nmetadata: {name: node}\n"
            "spec: {provider: hpc, nodes: 1, accelerator: {type: fake, count: 4}, cpu: 8,"
            " memory: 8Gi}\n---\napiVersion: trainform/v1\nkind: Queue\nmetadata: {name: debug}\n"
            "spec: {pools: [{pool: node, nominalQuota: {gpu: 4}}]}\n"
        )
        commit(repo, {"trainform.yaml": config, "platform.yaml": platform}, "base")
        env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
        result = subprocess.run(
            [str(TRAINFORM), "review", "repo", "--base", "HEAD", "--trace-from", "slurm",
             "--since", since, "--format", "json"],
            cwd=tmp_path, env={**env, "NO_COLOR": "1"}, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
    finally:
        slurm_cluster.run(["sacctmgr", "-i", "delete", "user", "root", f"account={account}"])
        slurm_cluster.run(["sacctmgr", "-i", "delete", "account", account])
    assert result.returncode == 0, result.stdout + result.stderr
    simulation = json.loads(result.stdout)["simulation"]
    assert simulation["jobs"] == 3 and simulation["trace"].startswith("slurm accounting")
    real = simulation["actual"]["queues"]["debug"]
    assert real["count"] == 3
    assert (real["p50"], real["max"]) == (float(actual[1]), float(actual[2]))
    assert simulation["queues"]["debug"]["base"]["count"] == 3
    # The Slurm model ran with the cluster's own settings (scripts/slurm-cluster.sh).
    assert simulation["scheduler"]["bfInterval"] == 2.0
    assert simulation["scheduler"]["priorityWeights"]["qos"] == 0
    # The two 4-GPU jobs run one after the other: the second waits in the simulation too.
    assert simulation["queues"]["debug"]["base"]["max"] >= 2
