"""Smoke tests of the Slurm test cluster (tests/services/slurm.py), and the Slurm 22.05 facts
the Slurm provider relies on: GPU jobs run, `squeue --json`/`sacct --json` field names,
association and QOS GPU limits keep jobs pending (and their reason codes), QOS preemption
requeues, a partition written to the include file appears on `scontrol reconfigure`, an
unknown node there makes slurmctld exit, and a client parse checks syntax offline."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.services.slurm import (
    FOLDER_PREFIX,
    LOCK_NAME,
    SlurmCluster,
    hold_lock,
    reap_abandoned,
    restart_controller,
)

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


def pending_reason(cluster: SlurmCluster, job_id: int) -> str | None:
    def reason() -> str | None:
        job = squeue_job(cluster, job_id)
        return job["state_reason"] if job and job["state_reason"] != "None" else None

    return poll(reason, timeout=15)


def sacctmgr(cluster: SlurmCluster, *argv: str) -> str:
    return ok(cluster, "sacctmgr", "-i", *argv)


def remove(cluster: SlurmCluster, entity: str, names: str) -> None:
    """Delete what a test added to the shared cluster's accounting (retried: slurmdbd
    refuses while the cancelled jobs still count as running)."""
    argv = ["sacctmgr", "-i", "delete", entity, "where", f"name={names}"]
    assert poll(lambda: cluster.run(argv).returncode == 0, timeout=15), cluster.run(argv).stderr


@pytest.fixture
def partitions(slurm_cluster: SlurmCluster) -> Iterator[Path]:
    """The include file; restored (and the controller brought back if it died) after."""
    original = slurm_cluster.partitions_file.read_text()
    yield slurm_cluster.partitions_file
    slurm_cluster.partitions_file.write_text(original)
    if slurm_cluster.controller_alive():
        ok(slurm_cluster, "scontrol", "reconfigure")
    else:
        restart_controller(slurm_cluster)


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
    assert (job["partition"], job["account"], job["qos"]) == ("debug", "root", "normal")
    assert job["comment"]["job"] == "trainform-smoke"
    assert job["exit_code"] == {"status": "SUCCESS", "return_code": 0}
    assert (slurm_cluster.job_root / "smoke.out").read_text() == "gpus=0,1\n"
    assert slurm_cluster.env() == {"SLURM_CONF": str(slurm_cluster.conf)}


def test_failed_job_exit_code_is_in_squeue_json_and_sacct_text(
    slurm_cluster: SlurmCluster,
) -> None:
    job_id = submit(slurm_cluster, "fails", "--comment", "trainform-fails", "--wrap", "exit 7")

    def failed() -> dict[str, Any] | None:
        job = squeue_job(slurm_cluster, job_id)
        return job if job and job["job_state"] == "FAILED" else None

    job = poll(failed)
    assert job, f"job {job_id} did not fail: {squeue_job(slurm_cluster, job_id)}"
    # squeue --json: the raw wait status (exit code << 8); finished jobs stay listed for
    # MinJobAge seconds (600 here), unlike plain `squeue`.
    assert (job["exit_code"], job["state_reason"], job["comment"]) == (
        7 << 8,
        "NonZeroExitCode",
        "trainform-fails",
    )
    # sacct's text output has "exit:signal"; its --json exit_code of a job record says
    # SUCCESS/0 for this job in 22.05.8, so the provider must not rely on it.
    argv = ["sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "State,ExitCode"]
    assert poll(lambda: ok(slurm_cluster, *argv).strip() == "FAILED|7:0"), ok(slurm_cluster, *argv)


def test_association_and_qos_gpu_limits_keep_jobs_pending(slurm_cluster: SlurmCluster) -> None:
    sacctmgr(slurm_cluster, "add", "account", "smoke-limited")
    sacctmgr(slurm_cluster, "add", "user", "root", "account=smoke-limited")
    sacctmgr(slurm_cluster, "modify", "account", "where", "name=smoke-limited", "set",
             "GrpTRES=gres/gpu=2")  # fmt: skip
    sacctmgr(slurm_cluster, "add", "qos", "smoke-qos")
    sacctmgr(slurm_cluster, "modify", "qos", "where", "name=smoke-qos", "set",
             "GrpTRES=gres/gpu=2")  # fmt: skip
    sacctmgr(slurm_cluster, "modify", "user", "root", "set", "qos+=smoke-qos")
    listed = ok(slurm_cluster, "sacctmgr", "-nP", "show", "qos", "where", "name=smoke-qos",
                "format=name,grptres")  # fmt: skip
    assert listed.strip() == "smoke-qos|gres/gpu=2"

    by_account = submit(slurm_cluster, "by-account", "-A", "smoke-limited", "--gres=gpu:4",
                        "--wrap", WRAP)  # fmt: skip
    by_qos = submit(slurm_cluster, "by-qos", "--qos=smoke-qos", "--gres=gpu:4", "--wrap", WRAP)
    try:
        assert pending_reason(slurm_cluster, by_account) == "AssocGrpGRES"
        assert pending_reason(slurm_cluster, by_qos) == "QOSGrpGRES"
        job = squeue_job(slurm_cluster, by_account)
        assert job is not None
        assert (job["job_state"], job["account"], job["qos"]) == (
            "PENDING",
            "smoke-limited",
            "normal",
        )
    finally:
        ok(slurm_cluster, "scancel", str(by_account), str(by_qos))
        remove(slurm_cluster, "account", "smoke-limited")
        remove(slurm_cluster, "qos", "smoke-qos")


def test_higher_qos_preempts_and_requeues(slurm_cluster: SlurmCluster) -> None:
    sacctmgr(slurm_cluster, "add", "qos", "smoke-low")
    sacctmgr(slurm_cluster, "add", "qos", "smoke-high")
    sacctmgr(slurm_cluster, "modify", "qos", "where", "name=smoke-high", "set",
             "Preempt=smoke-low", "Priority=100")  # fmt: skip
    sacctmgr(slurm_cluster, "modify", "user", "root", "set", "qos+=smoke-low,smoke-high")
    low = submit(slurm_cluster, "low", "--qos=smoke-low", "--gres=gpu:4", "--wrap", "sleep 60")
    high = 0
    try:
        assert poll(lambda: (squeue_job(slurm_cluster, low) or {}).get("job_state") == "RUNNING")
        high = submit(slurm_cluster, "high", "--qos=smoke-high", "--gres=gpu:2", "--wrap", WRAP)

        def requeued() -> dict[str, Any] | None:
            job = squeue_job(slurm_cluster, low)
            done = job and job["restart_cnt"] >= 1 and job["state_reason"] == "BeginTime"
            return job if done else None

        # A requeued job counts one more restart and waits as PENDING, reason BeginTime
        # (briefly "None" first), before it may start again.
        job = poll(requeued)
        assert job, f"job {low} was not preempted: {squeue_job(slurm_cluster, low)}"
        assert job["job_state"] == "PENDING"
    finally:
        ok(slurm_cluster, "scancel", str(low), *([str(high)] if high else []))
        remove(slurm_cluster, "qos", "smoke-high,smoke-low")


def test_partition_from_include_file_appears_on_reconfigure(
    slurm_cluster: SlurmCluster, partitions: Path
) -> None:
    node = slurm_cluster.node_name
    partitions.write_text(partitions.read_text() + f"PartitionName=smoke Nodes={node} State=UP\n")
    ok(slurm_cluster, "scontrol", "reconfigure")
    assert poll(lambda: "smoke" in ok(slurm_cluster, "sinfo", "-h", "-o", "%R").split())


def test_a_two_node_job_spans_both_slurmd(slurm_cluster: SlurmCluster, partitions: Path) -> None:
    """Each node is a slurmd of its own (one per port on this host): srun's tasks of a
    2-node job run under both, the batch step on the first node."""
    nodes = ",".join(slurm_cluster.node_names)
    assert len(slurm_cluster.node_names) >= 2
    partitions.write_text(partitions.read_text() + f"PartitionName=smoke Nodes={nodes}\n")
    ok(slurm_cluster, "scontrol", "reconfigure")
    assert poll(lambda: "smoke" in ok(slurm_cluster, "sinfo", "-h", "-o", "%R").split())
    script = "srun --ntasks-per-node=1 sh -c 'echo task=$SLURM_NODEID:$SLURMD_NODENAME'"
    job = submit(slurm_cluster, "span", "-p", "smoke", "-N", "2", "--wrap", script)

    def completed() -> dict[str, Any] | None:
        found = sacct_job(slurm_cluster, job)
        return found if found and found["state"]["current"] == "COMPLETED" else None

    finished = poll(completed, timeout=60)
    assert finished, f"job {job} did not complete: {sacct_job(slurm_cluster, job)}"
    output = (slurm_cluster.job_root / "span.out").read_text()
    first, second = slurm_cluster.node_names[:2]
    assert sorted(line for line in output.split() if line.startswith("task=")) == [
        f"task=0:{first}",
        f"task=1:{second}",
    ], output


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("PartitionName=smoke Nodes=no-such-node State=UP", id="unknown-node"),
        pytest.param("PartitionName=smoke Nodes=ALL QOS=no-such-qos State=UP", id="unknown-qos"),
        pytest.param("PartitionName=debug Nodes=ALL State=UP", id="duplicate-partition"),
    ],
)
def test_invalid_partition_on_reconfigure_makes_slurmctld_exit(
    slurm_cluster: SlurmCluster, partitions: Path, line: str
) -> None:
    """What the provider must check before it writes the include file."""
    partitions.write_text(partitions.read_text() + line + "\n")
    slurm_cluster.run(["scontrol", "reconfigure"])
    assert poll(lambda: not slurm_cluster.controller_alive(), timeout=10)
    assert "fatal:" in slurm_cluster.log_tail(lines=3)


@pytest.mark.parametrize(
    ("line", "valid"),
    [
        pytest.param("PartitionName=fine Nodes=ALL MaxTime=60 State=UP", True, id="valid"),
        pytest.param("PartitionName=bad Nodes=ALL Bogus=1", False, id="unknown-key"),
        pytest.param("PartitionName=bad Nodes=ALL MaxTime=abc", False, id="bad-value"),
        # Parsing does not know the nodes: only the controller does (see the test above).
        pytest.param("PartitionName=bad Nodes=no-such-node", True, id="unknown-node-parses"),
    ],
)
def test_client_parse_checks_syntax_offline(
    slurm_cluster: SlurmCluster, tmp_path: Path, line: str, valid: bool
) -> None:
    candidate = tmp_path / "candidate.conf"
    candidate.write_text(line + "\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        slurm_cluster.conf.read_text().replace(
            f"Include {slurm_cluster.partitions_file}", f"Include {candidate}"
        )
    )
    # Any client parses SLURM_CONF (and its includes) first; `show hostnames` then needs
    # no daemon. Exit 1 and "error: ..." on stderr for a syntax error.
    result = slurm_cluster.run(["scontrol", "show", "hostnames", "x"], conf=conf)
    assert (result.returncode == 0) is valid, result.stderr


@pytest.mark.parametrize("command", [["scontrol", "ping"], ["sacctmgr", "-nP", "show", "cluster"]])
def test_daemons_answer(slurm_cluster: SlurmCluster, command: list[str]) -> None:
    assert ok(slurm_cluster, *command).strip()


def test_reap_removes_only_clusters_whose_session_ended(tmp_path: Path) -> None:
    ended = tmp_path / f"{FOLDER_PREFIX}ended"
    alive = tmp_path / f"{FOLDER_PREFIX}alive"
    starting = tmp_path / f"{FOLDER_PREFIX}starting"  # between mkdtemp and its lock
    other = tmp_path / "not-a-cluster"
    for folder in (ended, alive, starting, other):
        folder.mkdir()
    (ended / LOCK_NAME).touch()
    (other / LOCK_NAME).touch()
    with hold_lock(alive):
        assert reap_abandoned(tmp_path) == [ended]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        folder.name for folder in (alive, starting, other)
    )
