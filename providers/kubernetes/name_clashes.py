"""Two resources whose objects would get the same cluster-scoped name, refused at plan.

Cluster-scoped names are built by joining spec names (naming.py, project_queues.py): a
Quota's ClusterQueue is `<namePrefix><queue>-<project>`, a pool's ResourceFlavor
`<namePrefix><pool>`, and the pod-count flavor of a Quota with runningJobs on a queue of
several pools `<namePrefix><queue>-<project>-jobs`. So queue `train-a` with project `b`
and queue `train` with project `a-b` both render the ClusterQueue `train-a-b`, and a pool
named `train-vision-jobs` the flavor of Quota vision/train. The API server has one object
per name, so the second writer would find the first's object and stop with "it exists
and is not this trainform's". The plan refuses it instead, at the field that makes the
name, naming both resources. Pure; called by provider.py.
"""

from __future__ import annotations

from trainform.providers.base import DesiredResource, ValidationProblem
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.project_queues import (
    counts_jobs_apart,
    jobs_flavor_name,
    project_queue_name,
)

Claim = tuple[str, str, str, str]
"""(kind, name, address, field) of one cluster-scoped object a resource writes."""


def _claims(resources: list[DesiredResource], naming: Naming) -> list[Claim]:
    queues = {r.name: r.spec for r in resources if r.kind == "Queue"}
    found: list[Claim] = []
    for resource in resources:
        if resource.kind == "ResourcePool":
            name = naming.cluster_name(resource.name)
            found.append(("ResourceFlavor", name, resource.address, "metadata.name"))
        if resource.kind != "Quota":
            continue
        queue, project = str(resource.spec.get("queue", "")), resource.project or ""
        name = project_queue_name(naming, queue, project)
        found.append(("ClusterQueue", name, resource.address, "spec.queue"))
        facts = {"flavors": [e.get("pool") for e in (queues.get(queue) or {}).get("pools", [])]}
        if counts_jobs_apart(facts, resource.spec.get("limits") or {}):
            name = jobs_flavor_name(naming, queue, project)
            found.append(("ResourceFlavor", name, resource.address, "spec.limits.runningJobs"))
    return found


def name_clash_problems(
    resources: list[DesiredResource], naming: Naming
) -> list[ValidationProblem]:
    """A problem at each resource whose object's name another resource's object takes."""
    by_name: dict[tuple[str, str], list[Claim]] = {}
    for claim in _claims(resources, naming):
        by_name.setdefault(claim[:2], []).append(claim)
    problems = []
    for (kind, name), claims in sorted(by_name.items()):
        owners = sorted({claim[2] for claim in claims})
        if len(owners) < 2:
            continue
        for _, _, address, field in claims:
            others = ", ".join(o for o in owners if o != address)
            problems.append(
                ValidationProblem(
                    address,
                    field,
                    f"{kind} {name} would be written by {address} and by {others}: names "
                    "are joined from spec names (<queue>-<project>, <pool>, "
                    "<queue>-<project>-jobs) and the cluster holds one object per name; "
                    "rename one of them",
                )
            )
    return problems
