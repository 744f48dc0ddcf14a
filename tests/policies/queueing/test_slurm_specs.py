"""The Slurm model reads the settings the Slurm provider writes: an imported site (its
limits under `spec.slurm.*`, nominalQuota empty) is simulated with its PriorityTiers, QOS
limits, Preempt lists and per-user and per-account association limits."""

from __future__ import annotations

from pathlib import Path

from trainform.policies.queueing import TraceJob
from trainform.policies.queueing.slurm_model import SlurmAssociation, SlurmPartition, SlurmQos
from trainform.policies.queueing.slurm_sim import simulate_slurm
from trainform.policies.queueing.slurm_specs import (
    ClusterPreemption,
    slurm_platform_from_specs,
    tres_gpus,
)
from trainform.specs import load_specs

CONFIG = """\
apiVersion: trainform/v1
providers:
  - name: hpc
    type: slurm
    connection: {conf: /etc/slurm/slurm.conf}
"""
# What `trainform import` writes for a site with two partitions sharing QOS `train`, a
# scavenger partition preemptible by it, an account tree and per-user limits.
SITE = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: node}
spec: {provider: hpc, nodes: 2, accelerator: {type: fake, count: 4}, cpu: 8, memory: 8Gi}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: gpu}
spec:
  pools: [{pool: node, nominalQuota: {}}]
  defaultPriority: 10
  slurm:
    partition: {PriorityTier: '10', QOS: train}
    qos: {GrpTRES: 'cpu=64,gres/gpu=GPUS', GrpJobs: '', MaxTRESPerUser: 'gres/gpu=3',
          MaxJobsPerUser: '', Preempt: scavenge, PreemptMode: cluster, MaxWall: ''}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: gpu-long}
spec:
  pools: [{pool: node, nominalQuota: {}}]
  defaultPriority: 10
  slurm: {qosFrom: gpu, partition: {PriorityTier: '5', QOS: train}}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: scavenge}
spec:
  pools: [{pool: node, nominalQuota: {}}]
  slurm:
    partition: {QOS: scavenge}
    qos: {GrpTRES: '', PreemptMode: requeue}
---
apiVersion: trainform/v1
kind: Project
metadata: {name: research}
spec:
  owners: [research]
  users: [alice, bob]
  slurm:
    parent: root
    limits: {GrpTRES: 'gres/gpu=6', GrpJobs: '', MaxJobs: '2'}
    users:
      bob: {MaxJobs: '1'}
---
apiVersion: trainform/v1
kind: Quota
metadata: {name: research-gpu, project: research}
spec:
  queue: gpu
  limits: {}
  slurm:
    users:
      alice: {GrpTRES: 'gres/gpu=2'}
"""


def site(tmp_path: Path, gpus: int = 4) -> Path:
    folder = tmp_path / f"site-{gpus}"
    folder.mkdir()
    (folder / "trainform.yaml").write_text(CONFIG, encoding="utf-8")
    (folder / "site.yaml").write_text(SITE.replace("GPUS", str(gpus)), encoding="utf-8")
    return folder


def test_an_imported_site_becomes_its_partitions_qos_and_associations(tmp_path: Path) -> None:
    platform = slurm_platform_from_specs(load_specs(str(site(tmp_path))))
    assert platform.partitions == {
        "gpu": SlurmPartition("gpu", "node", tier=10, qos="train"),
        "gpu-long": SlurmPartition("gpu-long", "node", tier=5, qos="train"),
        "scavenge": SlurmPartition("scavenge", "node", tier=1, qos="scavenge"),
    }
    assert platform.qos == {
        "train": SlurmQos("train", priority=10, gpu_limit=4, user_gpu_limit=3,
                          preempt=("scavenge",), preempt_mode="requeue"),
        "scavenge": SlurmQos("scavenge", preempt_mode="requeue"),
    }  # fmt: skip
    assert platform.associations == {
        ("research", ""): SlurmAssociation("research", gpu_limit=6, user_max_jobs=2)
    }
    assert platform.user_associations == {
        ("research", "bob", ""): SlurmAssociation("research", user="bob", user_max_jobs=1),
        ("research", "alice", "gpu"): SlurmAssociation(
            "research", partition="gpu", user="alice", gpu_limit=2
        ),
    }
    assert platform.parents == {"research": "root"}
    off = slurm_platform_from_specs(load_specs(str(site(tmp_path, 5))), None,
                                    ClusterPreemption("preempt/none", "off"))  # fmt: skip
    assert (off.qos["train"].preempt, off.qos["train"].preempt_mode) == ((), "off")


def test_tres_gpus_reads_the_plain_gpu_count() -> None:
    assert [tres_gpus(t) for t in ("cpu=4,gres/gpu=8", "gres/gpu=-1", "", "mem=1G")] == [
        8, None, None, None,
    ]  # fmt: skip


def job(key: str, submit: float, queue: str, gpus: int, user: str, seconds: float) -> TraceJob:
    return TraceJob(key, submit, "research", queue, gpus, seconds, user=user)


def test_every_job_of_an_imported_site_is_simulated_under_its_own_limits(tmp_path: Path) -> None:
    jobs = [
        job("a1", 0, "gpu", 2, "alice", 100),  # QOS train 2/4, account research 2/6
        # alice's GrpTRES of 2 on gpu is hidden by the QOS's (Slurm applies the QOS's)
        job("a2", 1, "gpu", 1, "alice", 100),
        job("c1", 2, "gpu", 2, "carol", 100),  # train would hold 5 of 4: waits for a1
        job("s1", 3, "scavenge", 4, "dave", 100),  # no QOS limit; the account's 6 bind
        job("b1", 4, "gpu-long", 1, "bob", 50),  # gpu-long shares train: 4/4
        job("b2", 5, "gpu-long", 1, "bob", 50),  # bob's MaxJobs 1: after b1
    ]
    result = simulate_slurm(slurm_platform_from_specs(load_specs(str(site(tmp_path)))), jobs)
    assert result.never_admitted == []
    starts = {outcome.id: outcome.start for outcome in result.jobs}
    assert starts == {"a1": 0, "a2": 1, "c1": 100, "s1": 104, "b1": 4, "b2": 54}
    assert result.held[("research", "scavenge")] == {"project-gpu-quota": 101.0}
    # Twice the QOS's GPUs: c1 starts at once.
    doubled = simulate_slurm(slurm_platform_from_specs(load_specs(str(site(tmp_path, 8)))), jobs)
    assert {o.id: o.start for o in doubled.jobs}["c1"] == 2


def test_a_preempt_list_of_the_site_preempts_its_scavenger_jobs(tmp_path: Path) -> None:
    jobs = [job("s1", 0, "scavenge", 4, "dave", 100), job("g1", 1, "gpu", 3, "carol", 10),
            job("s2", 0, "scavenge", 2, "dave", 100)]  # fmt: skip
    specs = load_specs(str(site(tmp_path)))
    result = simulate_slurm(slurm_platform_from_specs(specs), jobs)
    assert {o.id: o.start for o in result.jobs}["g1"] == 1 and result.preemptions == 1
    no_preempt = tmp_path / "no-preempt"
    no_preempt.mkdir()
    (no_preempt / "trainform.yaml").write_text(CONFIG, encoding="utf-8")
    text = SITE.replace("GPUS", "4").replace("Preempt: scavenge, ", "")
    (no_preempt / "site.yaml").write_text(text, encoding="utf-8")
    plain = simulate_slurm(slurm_platform_from_specs(load_specs(str(no_preempt))), jobs)
    assert {o.id: o.start for o in plain.jobs}["g1"] == 100 and plain.preemptions == 0


def test_a_job_over_a_limit_of_the_site_is_never_admitted_with_that_limit(tmp_path: Path) -> None:
    jobs = [job("big", 0, "gpu", 4, "alice", 10), job("huge", 0, "gpu", 5, "carol", 10)]
    result = simulate_slurm(slurm_platform_from_specs(load_specs(str(site(tmp_path)))), jobs)
    assert result.never_admitted == ["big", "huge"]
    assert result.reasons == {
        "big": "asks 4 GPUs; QOS train MaxTRESPerUser allows 3",
        "huge": "asks 5 GPUs; QOS train GrpTRES allows 4",
    }


def test_a_job_under_another_qos_is_held_to_its_partitions_qos_limits_too(
    tmp_path: Path,
) -> None:
    """A partition QOS limit wins over the job's own QOS (Slurm's limit hierarchy), and
    the job counts in both: jobs asking --qos=scavenge on partition gpu still share train's
    4 GPUs."""
    platform = slurm_platform_from_specs(load_specs(str(site(tmp_path))))
    jobs = [
        TraceJob(f"j{n}", n, "research", "gpu", 2, 100, user=f"u{n}", qos="scavenge")
        for n in range(3)
    ]
    result = simulate_slurm(platform, jobs)
    assert [o.start for o in result.jobs] == [0, 1, 100]
    assert result.held[("research", "gpu")] == {"queue-qos-limit": 98.0}
