"""Calibration through the CLI path users run, against the real Slurm test cluster: a
site built by hand (two partitions on one 4-GPU node: `hi`, PriorityTier 10, whose QOS
allows 2 GPUs in all; `lo`, whose QOS allows each user 2 running jobs), 9 jobs of 20 s
submitted at once (3 of 2 GPUs on hi, 6 of 1 GPU on lo, run concurrently on the node),
then `trainform import` of the site into a spec folder and `trainform review
--trace-from slurm` of that folder. Per queue, the simulated base p50 and p95 waits are
within 25% of the waits Slurm accounted, and no job is "never admitted". The jobs run in
three waves: about 65 s of cluster time, 1.5 to 2 minutes in all with import and review.
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path

import pytest

from tests.engine.support import run_trainform
from tests.policies.queueing.slurm_calibration import until_accepted
from tests.policies.review.fixture import commit, git
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow

SECONDS, SHARE = 20, 0.25
JOBS = [("hi", 2)] * 3 + [("lo", 1)] * 6


def ok(cluster: SlurmCluster, *argv: str) -> str:
    result = cluster.run(list(argv))
    assert result.returncode == 0, f"{' '.join(argv)}: {result.stdout}{result.stderr}"
    return str(result.stdout)


def build_site(cluster: SlurmCluster, p: str) -> None:
    for argv in (
        ["add", "qos", f"{p}-hi", "Priority=10", "GrpTRES=gres/gpu=2"],
        ["add", "qos", f"{p}-lo", "MaxJobsPerUser=2"],
        ["add", "account", f"{p}-acct", "Description=calibration", "Organization=ml"],
        ["add", "user", "root", f"account={p}-acct", f"QOS=normal,{p}-hi,{p}-lo"],
    ):
        ok(cluster, "sacctmgr", "-i", *argv)
    node = cluster.node_name
    with cluster.partitions_file.open("a") as handle:
        handle.write(
            f"PartitionName={p}-hi Nodes={node} PriorityTier=10 QOS={p}-hi MaxTime=60\n"
            f"PartitionName={p}-lo Nodes={node} PriorityTier=1 QOS={p}-lo MaxTime=60\n"
        )
    ok(cluster, "scontrol", "reconfigure")
    until_accepted(cluster, f"{p}-acct", [(f"{p}-{q}", f"{p}-{q}") for q in ("hi", "lo")])


def run_jobs(cluster: SlurmCluster, p: str) -> list[str]:
    ids = [
        ok(cluster, "sbatch", "--parsable", "-o", "/dev/null", f"--account={p}-acct",
           f"--partition={p}-{queue}", f"--qos={p}-{queue}", f"--gres=gpu:{gpus}",
           "--time=2", "--wrap", f"sleep {SECONDS}").strip().split(";")[0]
        for queue, gpus in JOBS
    ]  # fmt: skip
    deadline = time.monotonic() + 240
    while True:
        lines = ok(cluster, "sacct", "-X", "-n", "-P", "-j", ",".join(ids),
                   "-o", "State,Partition").split()  # fmt: skip
        # slurmdbd records a finished job's partition a little after it ends
        done = [line for line in lines if line.startswith("COMPLETED|") and line[10:]]
        if len(done) == len(ids):
            return ids
        assert time.monotonic() < deadline, f"jobs did not complete: {lines}"
        time.sleep(1)


def test_review_of_an_imported_site_matches_slurm_within_a_quarter_per_queue(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    cluster, p = slurm_cluster, fixtures.unique_prefix("cal")
    original = cluster.partitions_file.read_text()
    since = datetime.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    root = tmp_path / "specs"
    root.mkdir()
    try:
        build_site(cluster, p)
        run_jobs(cluster, p)
        (root / "trainform.yaml").write_text(
            fixtures.config(cluster, cluster.job_root / p, local=False)
        )
        imported = run_trainform("import", "--from", "hpc", ".", cwd=root, timeout=180)
        assert imported.returncode == 0, imported.stdout + imported.stderr
        git(root, "init", "-q", "-b", "main")
        commit(root, {}, "the imported site")
        result = run_trainform("review", ".", "--base", "HEAD", "--trace-from", "slurm",
                               "--since", since, "--format", "json", cwd=root,
                               timeout=180)  # fmt: skip
    finally:
        cluster.partitions_file.write_text(original)
        cluster.run(["scontrol", "reconfigure"])
        cluster.run(["sacctmgr", "-i", "delete", "user", "root", f"account={p}-acct"])
        cluster.run(["sacctmgr", "-i", "delete", "account", f"{p}-acct"])
        for queue in ("hi", "lo"):
            cluster.run(["sacctmgr", "-i", "delete", "qos", f"{p}-{queue}"])
    assert result.returncode == 0, result.stdout + result.stderr
    simulation = json.loads(result.stdout)["simulation"]
    assert simulation["jobs"] == len(JOBS)
    assert simulation["base"]["never_admitted"] == []
    rows = []
    for name, count in (("hi", 3), ("lo", 6)):
        queue = f"{p}-{name}"
        real, simulated = simulation["actual"]["queues"][queue], simulation["queues"][queue]["base"]
        assert real["count"] == simulated["count"] == count
        for stat in ("p50", "p95"):
            rows.append((queue, stat, real[stat], simulated[stat]))
    print("\n" + "\n".join(f"{q} {s}: real {r:.0f} s, simulated {m:.0f} s" for q, s, r, m in rows))
    print("scheduler:", simulation["scheduler"])
    for queue, stat, real_wait, simulated_wait in rows:
        assert real_wait >= SECONDS / 2, (queue, stat, real_wait)  # the limits made jobs wait
        assert abs(simulated_wait - real_wait) <= SHARE * real_wait, (queue, stat, rows)
