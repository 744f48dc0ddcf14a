"""Fair sharing in the Kueue stand-in (kube_api/kueue_fairsharing.py): ClusterQueues that
borrow from one Cohort are admitted in the order of Kueue's DominantResourceShare
tournament, so their shares of what they borrow follow their `fairSharing.weight`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.services.kube_api import KubeAPI
from tests.services.kube_api.kueue_fairsharing import dominant_share
from tests.services.kube_api.kueue_quota import Tree
from tests.services.test_kube_api_kueue import GPU, KUEUE, Cluster, V, unique


@pytest.fixture
def cluster(kueue: KubeAPI) -> Iterator[Cluster]:
    before = kueue.snapshot()
    made = Cluster(kueue)
    yield made
    kueue.kueue.fair_sharing = True
    kueue.kueue.stop()
    kueue.delete_created_since(before)
    made.client.close()


def _cohort(cluster: Cluster, flavor: str, gpus: int) -> str:
    name = unique("cohort")
    quotas = [{"name": "cpu", "nominalQuota": 100}, {"name": GPU, "nominalQuota": gpus}]
    group = {"coveredResources": ["cpu", GPU], "flavors": [{"name": flavor, "resources": quotas}]}
    body = {"apiVersion": f"{KUEUE}/{V}", "kind": "Cohort", "metadata": {"name": name}}
    body["spec"] = {"resourceGroups": [group]}
    cluster.custom.create_cluster_custom_object(KUEUE, V, "cohorts", body)
    return name


def _admitted_per_queue(fair: bool, cluster: Cluster, kueue: KubeAPI) -> dict[str, int]:
    """Two ClusterQueues of weights 1 and 2 with no quota of their own, borrowing the nine
    GPUs of their Cohort; six one-GPU jobs queued in each before Kueue looks at them."""
    kueue.kueue.fair_sharing = fair
    flavor = cluster.flavor(unique("gpu"), nodeLabels={"pool": "gpu"})
    cohort = _cohort(cluster, flavor, 9)
    for queue, weight in (("first", "1"), ("second", "2")):
        name = unique(queue)
        quotas = {flavor: {"cpu": 0, GPU: 0}}
        cluster.cluster_queue(name, quotas, cohortName=cohort, fairSharing={"weight": weight})
        cluster.local_queue(queue, name)
    kueue.kueue.stop()
    for queue in ("first", "second"):  # the first queue's jobs are older
        for i in range(6):
            cluster.job(f"{queue}{i}", queue, 1)
    kueue.kueue.start()
    return {
        queue: sum(not cluster.suspended(f"{queue}{i}") for i in range(6))
        for queue in ("first", "second")
    }


def test_borrowed_quota_is_shared_by_fair_sharing_weight(cluster: Cluster, kueue: KubeAPI) -> None:
    assert _admitted_per_queue(True, cluster, kueue) == {"first": 3, "second": 6}


def test_without_fair_sharing_the_older_jobs_take_the_cohort(
    cluster: Cluster, kueue: KubeAPI
) -> None:
    assert _admitted_per_queue(False, cluster, kueue) == {"first": 6, "second": 3}


def _queue(name: str, cohort: str, nominal: int) -> dict:
    resources = [{"name": GPU, "nominalQuota": nominal}]
    spec = {
        "cohortName": cohort,
        "resourceGroups": [
            {"coveredResources": [GPU], "flavors": [{"name": "f", "resources": resources}]}
        ],
    }
    return {"metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("used", "weight", "expected"),
    [
        pytest.param(4, 1.0, (False, 0.0), id="within-its-own-quota"),
        pytest.param(7, 1.0, (False, 3 * 1000 / 10), id="borrowing-over-what-the-parent-lends"),
        pytest.param(7, 2.0, (False, 3 * 1000 / 10 / 2), id="divided-by-its-weight"),
        pytest.param(7, 0.0, (True, 3 * 1000 / 10), id="zero-weight-borrowing-sorts-last"),
    ],
)
def test_dominant_resource_share_follows_kueue(
    used: int, weight: float, expected: tuple[bool, float]
) -> None:
    """dominantResourceShare: (usage - subtree quota) * 1000 / what the Cohort could lend;
    here the Cohort holds the two queues' 4 + 6 GPUs."""
    tree = Tree([_queue("a", "c", 4), _queue("b", "c", 6)], [])
    tree.add_usage("a", ("f", GPU), used)

    assert dominant_share(tree.queues["a"], {"a": weight}) == expected
