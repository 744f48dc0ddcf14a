"""Plan refuses, at the field with file:line, what Kueue would accept and then never run or
what the cluster cannot hold twice: a cycle of Cohorts (a queue's `cohort` naming itself,
or queues naming each other), and two resources whose objects get the same name
(`train-a` + project `b` and `train` + project `a-b` both render ClusterQueue
`train-a-b`; a pool named as a Quota's pod-count flavor). Nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.support import run_trainform
from tests.providers.kubernetes.fixtures import platform_folder, unique_prefix
from tests.services.kube_api import KubeAPI

POOL = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: {name}}}
spec: {{provider: k8s, nodes: 2, accelerator: {{type: h100, count: 8}}, cpu: 100, memory: 900Gi}}
"""
QUEUE = """\
---
apiVersion: trainform/v1
kind: Queue
metadata: {{name: {name}}}
spec:
  pools: [{{pool: {pool}, nominalQuota: {{gpu: 16, cpu: 200, memory: 1800Gi}}}}]
{extra}"""
PROJECT = """\
---
apiVersion: trainform/v1
kind: Project
metadata: {{name: {name}}}
spec: {{owners: [a@example.com]}}
"""
QUOTA = """\
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: {queue}, project: {project}}}
spec:
  queue: {queue}
  limits: {{gpu: 8{jobs}}}
"""


def _line(text: str, anchor: str, needle: str) -> int:
    """The number of the first line starting with `needle` after the line `anchor`."""
    lines = text.splitlines()
    start = lines.index(anchor)
    return next(n for n in range(start, len(lines)) if lines[n].startswith(needle)) + 1


def _plan(tmp_path: Path, api: KubeAPI, specs: str) -> tuple[int, str]:
    folder = platform_folder(tmp_path / "specs", api, unique_prefix(), specs)
    api.reset_requests()
    result = run_trainform("plan", ".", cwd=folder, timeout=120)
    writes = [r for r in api.requests if r.method not in ("GET",)]
    assert writes == [], writes
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("cohorts", "cycle"),
    [
        pytest.param({"train": "train"}, ["train -> train"], id="own-queue"),
        pytest.param(
            {"train": "tune", "tune": "train"},
            ["train -> tune -> train", "tune -> train -> tune"],
            id="two-queues",
        ),
    ],
)
def test_a_cohort_cycle_is_refused_at_the_cohort_of_each_queue_on_it(
    tmp_path: Path, kube_api: KubeAPI, cohorts: dict[str, str], cycle: list[str]
) -> None:
    specs = POOL.format(name="h100")
    for name in ("train", "tune", "other"):
        extra = f"  cohort: {cohorts[name]}\n" if name in cohorts else "  cohort: train\n"
        specs += QUEUE.format(name=name, pool="h100", extra=extra)

    code, output = _plan(tmp_path, kube_api, specs)

    assert code == 1, output
    for shown in cycle:
        queue = shown.split(" ")[0]
        line = _line(specs, f"metadata: {{name: {queue}}}", "  cohort:")
        assert f"Queue/{queue} (platform.yaml:{line}:" in output, output
        assert f"spec.cohort: cohort {cohorts[queue]!r} makes a cycle of Cohorts ({shown})" in (
            output
        )
    assert "pkg/cache/hierarchy/cycle.go" in output
    assert "Queue/other" not in output  # under the cycle, not on it: its own is reported


def test_two_quotas_rendering_one_cluster_queue_are_refused_naming_both(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    specs = POOL.format(name="h100")
    for name in ("train", "train-a"):
        specs += QUEUE.format(name=name, pool="h100", extra="")
    for name in ("b", "a-b"):
        specs += PROJECT.format(name=name)
    specs += QUOTA.format(queue="train-a", project="b", jobs="")
    specs += QUOTA.format(queue="train", project="a-b", jobs="")

    code, output = _plan(tmp_path, kube_api, specs)

    assert code == 1, output
    first = _line(specs, "metadata: {name: train-a, project: b}", "  queue:")
    second = _line(specs, "metadata: {name: train, project: a-b}", "  queue:")
    assert f"Quota/b/train-a (platform.yaml:{first}:" in output, output
    assert f"Quota/a-b/train (platform.yaml:{second}:" in output, output
    assert "would be written by Quota/a-b/train and by Quota/b/train-a" in output
    assert "would be written by Quota/b/train-a and by Quota/a-b/train" in output
    assert "adopt it" not in output


def test_a_pool_named_as_a_quotas_jobs_flavor_is_refused_naming_both(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    specs = POOL.format(name="h100") + "---\n" + POOL.format(name="a100")
    specs += "---\n" + POOL.format(name="train-vision-jobs")
    two_pools = (
        "pools:\n    - {pool: h100, nominalQuota: {gpu: 16}}\n"
        "    - {pool: a100, nominalQuota: {gpu: 16}}"
    )
    specs += QUEUE.format(name="train", pool="h100", extra="").replace(
        "pools: [{pool: h100, nominalQuota: {gpu: 16, cpu: 200, memory: 1800Gi}}]", two_pools
    )
    specs += PROJECT.format(name="vision")
    specs += QUOTA.format(queue="train", project="vision", jobs=", runningJobs: 2")

    code, output = _plan(tmp_path, kube_api, specs)

    assert code == 1, output
    assert (
        "ResourcePool/train-vision-jobs (platform.yaml:" in output
        and "Quota/vision/train (platform.yaml:" in output
    ), output
    assert "spec.limits.runningJobs: ResourceFlavor" in output
    assert "would be written by Quota/vision/train and by ResourcePool/train-vision-jobs" in output
