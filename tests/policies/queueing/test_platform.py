"""platform_from_specs: the GPU view of the example platform's pools, queues and quotas."""

from __future__ import annotations

from pathlib import Path

from trainform.policies.queueing import (
    PoolQuota,
    ProjectQuota,
    TraceJob,
    platform_from_specs,
    simulate,
)
from trainform.specs import load_specs

from tests.helpers import REPO
from tests.policies.support import CONFIG, POOL, PROJECT, folder, queue


def test_the_example_platform_becomes_gpu_pools_queues_and_quotas() -> None:
    model = platform_from_specs(load_specs(str(REPO / "examples" / "platform")))
    assert model.pools == {"h100": 128, "a100": 256, "hpc-a100": 256}
    pretrain = model.queues["pretrain"]
    assert pretrain.pools == (PoolQuota("h100", 96, borrowing_limit=32, lending_limit=48),)
    assert (pretrain.cohort, pretrain.default_priority, pretrain.fair_share_weight) == (
        "training",
        1000,
        2.0,
    )
    assert (
        pretrain.within_queue,
        pretrain.reclaim_within_cohort,
        pretrain.borrow_within_cohort,
        pretrain.borrow_max_priority,
    ) == ("LowerPriority", "Any", "LowerPriority", 500)
    finetune = model.queues["finetune"]
    assert [quota.pool for quota in finetune.pools] == ["a100", "h100"]
    assert finetune.pools[1].borrowing_limit == 0
    assert model.queues["eval"].queueing_strategy == "StrictFIFO"
    assert model.queues["hpc-batch"].cohort is None
    assert model.quotas[("alignment", "hpc-batch")] == ProjectQuota(
        "alignment", "hpc-batch", gpus=128, running_jobs=10
    )


def test_jobs_on_the_example_platform_are_admitted_within_their_quotas() -> None:
    model = platform_from_specs(load_specs(str(REPO / "examples" / "platform")))
    jobs = [
        TraceJob("a", 0, "llm-pretrain", "pretrain", 96, 3600),
        TraceJob("b", 10, "alignment", "finetune", 8, 600),
        TraceJob("c", 20, "alignment", "hpc-batch", 160, 60),  # over alignment's 128
    ]
    result = simulate(model, jobs)
    assert [outcome.wait for outcome in result.jobs] == [0, 0, None]
    assert result.jobs[0].priority == 1000
    assert "project 'alignment' may use at most 128" in result.reasons["c"]


def test_a_project_without_a_quota_runs_nothing_on_a_kubernetes_queue_only(
    tmp_path: Path,
) -> None:
    """Kubernetes: no Quota, no LocalQueue in the project's namespace (the provider refuses
    its jobs at plan); local: the queue alone holds it (providers/local/admission.py)."""
    jobs = [TraceJob("a", 0, "team-a", "team-a", 8, 60)]
    kubernetes = platform_from_specs(
        load_specs(folder(tmp_path / "k8s", {"p.yaml": POOL, "q.yaml": queue("team-a", 8)}))
    )
    result = simulate(kubernetes, jobs)
    assert result.jobs[0].wait is None
    assert "project 'team-a' has no Quota on queue 'team-a'" in result.reasons["a"]
    local = folder(tmp_path / "local", {"p.yaml": POOL.replace("k8s", "local"), "j.yaml": PROJECT})
    (local / "trainform.yaml").write_text(
        CONFIG.replace("{name: k8s, type: kubernetes}", "{name: local, type: local}"),
        encoding="utf-8",
    )
    (local / "q.yaml").write_text(queue("team-a", 8), encoding="utf-8")
    assert [o.wait for o in simulate(platform_from_specs(load_specs(local)), jobs).jobs] == [0]
