"""Real distributed training on the real Slurm test cluster, through the `trainform` CLI.

The `examples/distributed` job (a tiny DDP transformer, `torchrun train.py`, 2 nodes x 2
processes, gloo) runs as one 2-node Slurm job on a pool of both test nodes: each node is a
slurmd of its own (tests/services/slurm.py), srun starts one torchrun per node with
PET_NODE_RANK from SLURM_NODEID and the rendezvous on the first node. The job spans both
slurmd (sacct's node list of the step, the node launchers' lines in the log), writes
checkpoints, and after `scancel <job>.0` (its training step, not the job) the runner's
retry resumes every rank from the latest valid checkpoint and trains to success. A plain
`python3 group.py` of 2 nodes x 2 processes gets one Slurm task per process: four ranks,
two on each node, in one gloo group.

Real Slurm, real torch: without either this fails under CI=true (the cluster fixture's
`unavailable`), and torch is imported, not skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch  # noqa: F401  # the example needs it: missing is a failure, never a skip

from tests.engine.support import REPO, run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow

EXAMPLE = REPO / "examples" / "distributed"
STEPS = 60


def tf(folder: Path, *args: str, timeout: float = 180) -> str:
    result = run_trainform(*args, cwd=folder, timeout=timeout)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert result.returncode == 0, output
    return output


def job_status(folder: Path, address: str) -> dict[str, Any]:
    text = tf(folder, "status", "--dir", ".", "--format", "json")
    return next(job for job in json.loads(text)["jobs"] if job["address"] == address)


def poll(check: Any, timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(interval)


def platform_document(cluster: SlurmCluster, prefix: str) -> str:
    """The example's platform on the Slurm instance: a pool of both test nodes."""
    nodes = ",".join(cluster.node_names[:2])
    return f"""\
apiVersion: trainform/v1
kind: Project
metadata: {{name: "{{{{ team }}}}"}}
spec: {{owners: [ml-platform@example.com], specPaths: ["specs/**"], users: [root]}}
---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: {prefix}-pool}}
spec:
  provider: hpc
  nodes: 2
  cpu: {cluster.cpus}
  memory: {cluster.memory_mb}Mi
  accelerator: {{type: gpu, count: {cluster.gpus}}}
  nodeList: "{nodes}"
---
apiVersion: trainform/v1
kind: Queue
metadata: {{name: {prefix}-q}}
spec:
  pools: [{{pool: {prefix}-pool, nominalQuota: {{cpu: 4, memory: 4Gi}}}}]
  defaultPriority: 100
  maxRuntime: 1h
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: "{{{{ team }}}}-q", project: "{{{{ team }}}}"}}
spec: {{queue: {prefix}-q, limits: {{cpu: 4, memory: 4Gi, runningJobs: 2, maxWallTime: 1h}}}}
"""


@pytest.fixture(scope="module")
def platform(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    assert len(slurm_cluster.node_names) >= 2, slurm_cluster.node_names
    prefix = fixtures.unique_prefix("d")
    root = tmp_path_factory.mktemp("slurm-distributed") / "example"
    for folder in ("code", "data", "specs"):
        shutil.copytree(EXAMPLE / folder, root / folder)
    config = fixtures.config(slurm_cluster, slurm_cluster.job_root / prefix)
    config += (
        f"variables: {{team: {prefix}-team, steps: {STEPS}, stepSeconds: 0.3, dataDelay: 0}}\n"
        "policies:\n  settings:\n    project-isolation:\n      adminPaths: ['specs/**']\n"
    )
    (root / "trainform.yaml").write_text(config)
    (root / "specs" / "platform.yaml").write_text(platform_document(slurm_cluster, prefix))
    training = root / "specs" / "training.yaml"
    training.write_text(training.read_text().replace("default-queue", f"{prefix}-q"))
    # torchrun is the venv's: the job's nodes find it on the PATH trainform ran with.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        yield {"root": root, "prefix": prefix, "job": f"TrainingJob/{prefix}-team/char-transformer"}
    fixtures.cleanup(slurm_cluster, prefix)


def slurm_job_ids(cluster: SlurmCluster, address: str) -> list[str]:
    text = cluster.run(["squeue", "--noheader", "--format=%i %k"]).stdout
    return [line.split()[0] for line in text.splitlines() if f":{address}:" in line]


def step_nodes(cluster: SlurmCluster, job_id: str) -> dict[str, str]:
    """sacct's node list of each of the job's steps (batch, 0, ...)."""
    text = cluster.run(["sacct", "-nP", "-j", job_id, "--format=JobID,NodeList"]).stdout
    return {
        line.split("|")[0].split(".", 1)[-1]: line.split("|")[1]
        for line in text.splitlines()
        if "." in line.split("|")[0]
    }


def test_a_two_node_torchrun_job_spans_both_slurmd_and_resumes_after_a_step_cancel(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root, address = platform["root"], platform["job"]
    first, second = slurm_cluster.node_names[:2]

    output = tf(root, "apply", ".", "--auto-approve")
    assert "Apply complete" in output, output

    def checkpointed() -> dict[str, Any] | None:
        job = job_status(root, address)
        step = (job["latestValidCheckpoint"] or {}).get("step", 0)
        return job if job["phase"] == "running" and step >= 10 else None

    running = poll(checkpointed, timeout=240)
    assert running["attempt"] == 1
    (job_id,) = slurm_job_ids(slurm_cluster, address)
    cancelled = slurm_cluster.run(["scancel", f"{job_id}.0"])  # the training step only
    assert cancelled.returncode == 0, cancelled.stderr

    def succeeded() -> dict[str, Any] | None:
        job = job_status(root, address)
        return job if job["phase"] == "succeeded" else None

    done = poll(succeeded, timeout=300, interval=2.0)
    assert done["attempt"] == 2 and done["currentStep"] == STEPS
    runs = slurm_cluster.job_root / platform["prefix"] / "runs"
    (run_dir,) = runs.glob("*/char-transformer/*")
    first_log = (run_dir / "attempts" / "1" / "slurm.log").read_text()
    second_log = (run_dir / "attempts" / "2" / "slurm.log").read_text()
    retried = json.loads((run_dir / "attempts" / "1" / "result.json").read_text())
    assert retried["exit_code"] != 0 and retried["retry"]["attempt"] == 2, retried

    # One torchrun per node, each under its own slurmd, one group of four ranks.
    for log in (first_log, second_log):
        assert f"trainform: node 0 ({first}) starts 'torchrun'" in log, log
        assert f"trainform: node 1 ({second}) starts 'torchrun'" in log, log
        assert "rank 3/4 (node 1, local rank 1) joined the gloo group" in log, log
    assert step_nodes(slurm_cluster, job_id)["0"] == f"{first},{second}"
    assert step_nodes(slurm_cluster, job_id)["batch"] == first

    # The retry continued from the latest valid checkpoint, every rank from the same one.
    resumed = json.loads((run_dir / "attempts" / "2" / "result.json").read_text())
    assert resumed["exit_code"] == 0 and resumed["resumed_step"] >= 10, resumed
    checkpoint = Path(resumed["resumed_from"]).name
    for rank in range(4):
        assert f"rank {rank}: resumed from {checkpoint} at step {resumed['resumed_step']}" in (
            second_log
        ), second_log
    assert "step 1/" not in second_log  # it continued, it did not start over
    final = json.loads((run_dir / "output" / "final.json").read_text())
    assert (final["step"], final["worldSize"]) == (STEPS, 4)


GROUP = """\
import os, torch, torch.distributed as dist
from pathlib import Path
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank())])
dist.all_reduce(value)
rank, world = dist.get_rank(), dist.get_world_size()
host = os.environ["SLURMD_NODENAME"]
line = f"{rank} {world} {os.environ['LOCAL_RANK']} {host} {int(value.item())}"
Path(os.environ["TRAINFORM_OUTPUT_DIR"], f"rank-{rank}.txt").write_text(line)
dist.destroy_process_group()
"""


def test_a_command_without_torchrun_gets_one_slurm_task_per_process_in_one_group(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root, prefix = platform["root"], platform["prefix"]
    first, second = slurm_cluster.node_names[:2]
    (root / "group").mkdir()
    (root / "group" / "group.py").write_text(GROUP)
    (root / "specs" / "group.yaml").write_text(
        "apiVersion: trainform/v1\nkind: TrainingJob\n"
        'metadata: {name: gloo-group, project: "{{ team }}"}\n'
        f"spec:\n  queue: {prefix}-q\n  image: host-python\n  code: {{repo: group}}\n"
        "  command: [python3, group.py]\n"
        "  resources: {nodes: 2, procsPerNode: 2, cpu: 1, memory: 512Mi}\n"
    )
    address = f"TrainingJob/{prefix}-team/gloo-group"
    tf(root, "apply", ".", "--auto-approve")

    def finished() -> dict[str, Any] | None:
        job = job_status(root, address)
        return job if job["phase"] in ("succeeded", "failed") else None

    done = poll(finished, timeout=240, interval=2.0)
    assert done["phase"] == "succeeded", Path(done["log"]).read_text()
    runs = slurm_cluster.job_root / prefix / "runs"
    (output,) = runs.glob("*/gloo-group/*/output")
    lines = sorted(path.read_text() for path in output.glob("rank-*.txt"))
    assert lines == [
        f"0 4 0 {first} 6",
        f"1 4 1 {first} 6",
        f"2 4 0 {second} 6",
        f"3 4 1 {second} 6",
    ]
