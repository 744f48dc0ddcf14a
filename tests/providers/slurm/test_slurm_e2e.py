"""The Slurm provider end to end on the real test cluster, through the `trainform` CLI.

One platform per module: two projects, two queues on one pool, a quota per project, a
training job on one queue (datasets and the host image on a `local` instance next to the
`slurm` one) and a job asking for more GPUs than its project's quota. Tests run in file
order: the job runs on slurmd, checkpoints, is cancelled mid-run and resumes from its
latest valid checkpoint on the next apply; the over-quota job waits with a readable
reason; hand changes with sacctmgr show as drift and apply restores them; a partition
naming a node Slurm does not have is refused and the controller stays up.
"""

from __future__ import annotations

import getpass
import json
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import build_desired
from trainform.planner.session import ProviderSet
from trainform.providers.base import DesiredResource
from trainform.providers.errors import PermanentProviderError
from trainform.specs import load_specs

from tests.engine.support import QUICKSTART, run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow


def tf(folder: Path, *args: str, timeout: float = 180) -> tuple[int, str]:
    result = run_trainform(*args, cwd=folder, timeout=timeout)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


def ok(folder: Path, *args: str) -> str:
    code, output = tf(folder, *args)
    assert code == 0, output
    return output


def jobs(folder: Path) -> dict[str, dict[str, Any]]:
    text = ok(folder, "status", "--dir", ".", "--format", "json")
    return {job["address"]: job for job in json.loads(text)["jobs"]}


def poll(check: Any, timeout: float = 120, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(interval)


def job_document(name: str, project: str, queue: str, gpus: int, steps: int) -> str:
    return (
        "apiVersion: trainform/v1\nkind: TrainingJob\n"
        f"metadata: {{name: {name}, project: {project}}}\n"
        f"spec:\n  queue: {queue}\n  image: host-python\n  datasets: [tiny-corpus@v1]\n"
        "  code: {repo: code}\n  command: [python3, train.py]\n"
        f"  parameters: {{steps: {steps}, checkpointEvery: 5, stepSeconds: 0.4}}\n"
        f"  resources: {{nodes: 1, cpu: 1, memory: 256Mi, acceleratorsPerNode: {gpus}}}\n"
        "  checkpoint: {interval: 1m, keepLast: 3}\n  retries: {limit: 2}\n  maxRuntime: 30m\n"
    )


@pytest.fixture(scope="module")
def platform(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    prefix = fixtures.unique_prefix("e")
    root = tmp_path_factory.mktemp("slurm-e2e") / "specs"
    root.mkdir()
    shutil.copytree(QUICKSTART / "code", root / "code")
    shutil.copytree(QUICKSTART / "data", root / "data")
    (root / "trainform.yaml").write_text(
        fixtures.config(slurm_cluster, slurm_cluster.job_root / prefix)
    )
    a, b, q1, q2, pool = (f"{prefix}-{s}" for s in ("a", "b", "q1", "q2", "pool"))
    platform_docs = [
        fixtures.pool(slurm_cluster, pool),
        fixtures.project(a),
        fixtures.project(b),
        fixtures.queue(q1, pool),
        fixtures.queue(q2, pool, extra="  stopPolicy: Hold\n"),
        fixtures.quota(f"{a}-q1", a, q1, "{gpu: 1, runningJobs: 2, maxWallTime: 1h}"),
        fixtures.quota(f"{b}-q2", b, q2, "{gpu: 2, runningJobs: 1}"),
    ]
    (root / "platform.yaml").write_text("---\n".join(platform_docs))
    inputs = (
        "apiVersion: trainform/v1\nkind: Dataset\nmetadata: {name: tiny-corpus}\n"
        "spec: {source: data/tiny-corpus, format: text, versions: [{name: v1}]}\n---\n"
        "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: host-python}\n"
        "spec: {runtime: host}\n---\n"
        "apiVersion: trainform/v1\nkind: Dataset\nmetadata: {name: heldout}\n"
        "spec: {source: data/heldout, format: text, versions: [{name: v1}]}\n---\n"
        "apiVersion: trainform/v1\nkind: EvalSuite\n"
        f"metadata: {{name: heldout-perplexity, project: {a}}}\n"
        "spec:\n  image: host-python\n  code: {repo: code}\n"
        "  command: [python3, evaluate.py]\n  datasets: [heldout@v1]\n"
        "  metrics: [{name: perplexity, goal: minimize}]\n"
        "  gates: [{metric: perplexity, op: '<=', threshold: 1000.0}]\n---\n"
        + job_document("bigram", a, q1, gpus=1, steps=30)
        + "  evaluations: [{suite: heldout-perplexity}]\n"
        + "---\n"
        + job_document("greedy", a, q1, gpus=2, steps=5)
    )
    (root / "training.yaml").write_text(inputs)
    yield {"root": root, "prefix": prefix, "a": a, "q1": q1, "q2": q2, "pool": pool}
    fixtures.cleanup(slurm_cluster, prefix)


def job_ids(cluster: SlurmCluster, address: str) -> list[str]:
    text = cluster.run(["squeue", "--noheader", "--format=%i %k"]).stdout
    return [line.split()[0] for line in text.splitlines() if f":{address}:" in line]


def test_apply_runs_the_job_which_resumes_after_a_cancel(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root, a = platform["root"], platform["a"]
    bigram, greedy = f"TrainingJob/{a}/bigram", f"TrainingJob/{a}/greedy"

    output = ok(root, "apply", ".", "--auto-approve")
    assert "Apply complete" in output, output
    partitions = slurm_cluster.partitions_file.read_text()
    assert f"PartitionName={platform['q1']} " in partitions
    for derived in ("AllowAccounts=", "PriorityTier=", "DefMemPerGPU="):  # none declared
        assert derived not in partitions, partitions

    def checkpointed() -> dict[str, Any] | None:
        job = jobs(root)[bigram]
        ready = job["phase"] == "running" and (job["latestValidCheckpoint"] or {}).get("step", 0)
        return job if ready and job["latestValidCheckpoint"]["step"] >= 10 else None

    running = poll(checkpointed)
    assert running["attempt"] == 1
    slurm_cluster.run(["scancel", *job_ids(slurm_cluster, bigram)])
    cancelled = poll(lambda: jobs(root)[bigram]["phase"] == "cancelled" and jobs(root)[bigram])
    resume_point = cancelled["latestValidCheckpoint"]

    waiting = jobs(root)[greedy]
    assert waiting["phase"] == "queued"
    assert "project's GPU quota" in waiting["reason"] and "AssocGrpGRES" in waiting["reason"]

    output = ok(root, "apply", ".", "--auto-approve")
    assert f"resume from the latest valid checkpoint {resume_point['id']}" in output, output
    done = poll(lambda: jobs(root)[bigram]["phase"] == "succeeded" and jobs(root)[bigram], 180)
    assert done["attempt"] == 2 and done["currentStep"] == 30
    log = Path(done["log"]).read_text()
    assert f"resumed from {resume_point['path']} at step {resume_point['step']}" in log
    assert "step 1/30" not in log  # the step continued, it did not start over
    status = ok(root, "status", "-v", "--dir", ".")
    assert "AssocGrpGRES" in status

    output = ok(root, "apply", ".", "--auto-approve")  # the run succeeded: evaluate it
    assert "evaluate with EvalSuite/" in output, output

    def evaluated() -> dict[str, Any] | None:
        evaluation = jobs(root)[bigram]["evaluations"][0]
        return evaluation if evaluation["phase"] == "succeeded" else None

    evaluation = poll(evaluated, 120)
    assert evaluation["gate"] == "pass" and evaluation["metrics"]["perplexity"] > 0


def test_hand_changes_to_qos_and_association_limits_are_drift_and_apply_restores_them(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root, a, q1 = platform["root"], platform["a"], platform["q1"]
    ok(root, "apply", ".", "--auto-approve")  # converged already when run after the job test
    slurm_cluster.run(
        ["sacctmgr", "-i", "modify", "qos", "where", f"name={q1}", "set", "GrpTRES=cpu=6"]
    )
    slurm_cluster.run(
        [
            "sacctmgr",
            "-i",
            "modify",
            "account",
            "where",
            f"name={a}",
            "set",
            "GrpTRES=gres/gpu=0",
        ]
    )

    text = slurm_cluster.partitions_file.read_text()  # q2's block deleted from the file
    marker_line = f"# trainform:trainform:Queue/{platform['q2']}\n"
    start = text.index(marker_line)
    end = text.index("\n", start + len(marker_line)) + 1
    slurm_cluster.partitions_file.write_text(text[:start] + text[end:])

    code, output = tf(root, "drift", ".")

    assert code == 2, output
    assert f"missing: Queue/{platform['q2']}" in output, output
    assert f"Queue/{q1}" in output and "spec.pools[0].nominalQuota.cpu: applied 4, live 6" in output
    assert f"Quota/{a}/{a}-q1" in output and "spec.limits.gpu: applied 1, live 0" in output
    code, report = tf(root, "drift", ".", "--format", "json")
    findings = {f["address"]: f for f in json.loads(report)["findings"]}
    qos_evidence = findings[f"Queue/{q1}"]["evidence"]  # from sacctmgr show transactions
    assert (qos_evidence["object"], qos_evidence["action"]) == (f"QOS {q1}", "Modify QOS")
    assert qos_evidence["changedBy"] == getpass.getuser()
    assert qos_evidence["changedAt"].startswith(str(datetime.now(UTC).year))
    quota_evidence = findings[f"Quota/{a}/{a}-q1"]["evidence"]
    assert quota_evidence["object"] == f"association of account {a}"
    assert quota_evidence["action"] == "Modify Associations"
    ok(root, "apply", ".", "--auto-approve")
    code, output = tf(root, "plan", ".", "--detailed-exitcode")
    assert code == 0, output
    code, output = tf(root, "drift", ".")
    assert code == 0, output
    qos = slurm_cluster.run(["sacctmgr", "-nP", "show", "qos", q1, "format=GrpTRES"]).stdout
    assert "cpu=4" in qos
    assert f"PartitionName={platform['q2']} " in slurm_cluster.partitions_file.read_text()


def test_a_partition_naming_a_missing_node_is_refused_and_the_controller_stays_up(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root = platform["root"]
    providers = ProviderSet(load_specs(root).config, root)
    try:
        provider = providers.get("hpc")
        item = build_desired(load_specs(root))[f"Queue/{platform['q1']}"]
        before = slurm_cluster.partitions_file.read_text()
        ghost = DesiredResource(
            address=f"Queue/{platform['prefix']}-ghost",
            kind="Queue",
            name=f"{platform['prefix']}-ghost",
            project=None,
            document=item.document,
            outputs_of_dependencies={
                f"ResourcePool/{platform['pool']}": {"nodeList": "ghost[1-2]", "cpusPerNode": 1}
            },
        )
        with pytest.raises(PermanentProviderError, match="Slurm has no node ghost1, ghost2"):
            provider.create(ghost)
    finally:
        providers.close()
    assert slurm_cluster.partitions_file.read_text() == before
    assert "is UP" in slurm_cluster.run(["scontrol", "ping"]).stdout
    assert slurm_cluster.controller_alive()


def test_a_pool_on_nodes_slurm_lacks_fails_apply_and_leaves_slurm_conf_alone(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root, prefix = platform["root"], platform["prefix"]
    ghost_pool, ghost_queue = f"{prefix}-ghosts", f"{prefix}-ghostq"
    extra = root / "ghosts.yaml"
    extra.write_text(
        fixtures.pool(slurm_cluster, ghost_pool).replace(
            f"nodeList: {slurm_cluster.node_name}", "nodeList: 'ghost[1-2]'"
        )
        + "---\n"
        + fixtures.queue(ghost_queue, ghost_pool)
    )
    before = slurm_cluster.partitions_file.read_text()
    try:
        code, output = tf(root, "plan", ".")
        assert code == 0, output
        assert "Slurm knows no node named ghost1, ghost2" in output, output
        code, output = tf(root, "apply", ".", "--auto-approve")
        assert code == 1, output
        assert "Slurm has no such nodes (ghost1, ghost2)" in output, output
        assert f"Queue/{ghost_queue}" in output  # skipped: its pool failed
        assert slurm_cluster.partitions_file.read_text() == before
        assert "is UP" in slurm_cluster.run(["scontrol", "ping"]).stdout
    finally:
        extra.unlink()
    code, output = tf(root, "plan", ".", "--detailed-exitcode")
    assert code == 0, output


def test_a_job_requeued_by_slurm_resumes_from_its_latest_valid_checkpoint(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root, a, q1 = platform["root"], platform["a"], platform["q1"]
    address = f"TrainingJob/{a}/requeued"
    with (root / "training.yaml").open("a") as specs:
        specs.write("---\n" + job_document("requeued", a, q1, gpus=0, steps=25))
    ok(root, "apply", ".", "--auto-approve")

    def checkpointed() -> dict[str, Any] | None:
        job = jobs(root)[address]
        step = (job["latestValidCheckpoint"] or {}).get("step", 0)
        return job if job["phase"] == "running" and step >= 5 else None

    poll(checkpointed)
    [job_id] = job_ids(slurm_cluster, address)
    requeued = slurm_cluster.run(["scontrol", "requeue", job_id])
    assert requeued.returncode == 0, requeued.stderr

    def held_for_the_requeue_delay() -> dict[str, Any] | None:
        state = slurm_cluster.run(["squeue", "--noheader", "-j", job_id, "-o", "%T"]).stdout
        job = jobs(root)[address]
        return job if state.strip() == "PENDING" and job["phase"] == "queued" else None

    waiting = poll(held_for_the_requeue_delay)
    assert "requeue" in waiting["reason"], waiting["reason"]
    # Slurm holds a requeued job about 121 s (BeginTime); the test does not wait it out.
    released = slurm_cluster.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"])
    assert released.returncode == 0, released.stderr
    done = poll(lambda: jobs(root)[address]["phase"] == "succeeded" and jobs(root)[address], 180)

    assert done["attempt"] == 1  # Slurm requeued the same attempt; trainform submitted once
    assert done["currentStep"] == 25
    log = Path(done["log"]).read_text()
    assert "resumed from" in log, log
