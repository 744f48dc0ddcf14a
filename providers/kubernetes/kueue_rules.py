"""Kueue's admission rules, checked offline at plan time so a bad spec fails with file:line.

Kueue rejects these in its webhooks and CRD validations; trainform finds them before any
request. One resource at a time (`resource_problems`):

- a quota amount that is not a non-negative Kubernetes quantity;
- lendingLimit above nominalQuota for the same resource of a pool;
- borrowingLimit (or lendingLimit) on a queue without a cohort;
- the same pool (flavor) twice in one queue;
- reclaimWithinCohort Never with a borrowWithinCohort policy other than Never;
- more flavors or covered resources than a ClusterQueue holds (64 each);
- a namespace, flavor or queue name that is not a DNS-1123 label once prefixed;
- a pool with topology but no nodeSelector, a topology level twice, kubernetes.io/hostname
  above the lowest level, a toleration Kueue refuses (empty key without Exists, a value
  with Exists).
- a TrainingJob's names or spec.env the API server would refuse after admission
  (job_checks.py).

Across the resources of one provider instance (`instance_problems`):

- a queue admitting onto a pool that is not declared on this instance (flavor missing);
- two Quotas of one project on the same queue (both would own its LocalQueue);
- a TrainingJob whose project has no Quota on its queue (no LocalQueue: never admitted);
- runningJobs on a Quota whose project has a multi-node job on that queue (Kueue counts
  pods, so it would count one job per node), or whose queue has several pools some of
  which have topology (see project_queues.py);
- the API and webhook limits of api_limits.py (sizes, priorities, fair-share weights,
  accelerator resource names, toleration values, label key prefixes, annotation sizes,
  time limits, flavor x resource pairs), and a TrainingJob Kueue would never admit
  (admission_fit.py): pods larger than every pool's nodes, or more accelerators, cpu or
  memory than its queue (with what its cohort lends) or its project's Quota could ever
  give it on the pools its pods fit, or a Quota with runningJobs 0; the same for the
  evaluations of its EvalSuites, on the suite's queue where it names one.

Cohort cycles (cohort_cycles.py) and two resources rendering one object name
(name_clashes.py) are refused by the provider's `validate_all` beside these. Sharing a
flavor between queues is Kueue's normal way of pooling capacity, so only duplicates
inside one queue are errors. Pure; no I/O.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from trainform.providers.base import DesiredResource, ValidationProblem
from trainform.providers.kubernetes.admission_fit import (
    evaluation_fit_problems,
    job_fit_problems,
)
from trainform.providers.kubernetes.api_limits import limit_problems, queue_size_problems
from trainform.providers.kubernetes.job_checks import job_problems
from trainform.providers.kubernetes.manifests import AMOUNT_FIELDS
from trainform.providers.kubernetes.naming import Naming
from trainform.specs.quantity import parse_quantity

MAX_FLAVORS = 64
MAX_RESOURCES = 64
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _amount(value: Any) -> Decimal | None:
    try:
        amount = parse_quantity(str(value))
    except ValueError:
        return None
    return amount if amount >= 0 else None


def _queue_problems(resource: DesiredResource) -> list[tuple[str, str]]:
    spec = resource.spec
    found: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(spec.get("pools", [])):
        base = f"spec.pools[{index}]"
        pool = entry.get("pool", "")
        if pool in seen:
            found.append(
                (
                    f"{base}.pool",
                    f"pool {pool} is already listed at spec.pools[{seen[pool]}]; "
                    "a flavor appears once in a ClusterQueue",
                )
            )
        seen.setdefault(pool, index)
        amounts: dict[str, dict[str, Decimal | None]] = {}
        for field in AMOUNT_FIELDS:
            for key, value in (entry.get(field) or {}).items():
                parsed = _amount(value)
                if parsed is None:
                    found.append(
                        (f"{base}.{field}.{key}", f"{value!r} is not a non-negative quantity")
                    )
                amounts.setdefault(field, {})[key] = parsed
            if field != "nominalQuota" and entry.get(field) is not None and not spec.get("cohort"):
                found.append(
                    (
                        f"{base}.{field}",
                        f"{field} needs a cohort to borrow from or lend to; "
                        "set spec.cohort or remove it",
                    )
                )
        nominal = amounts.get("nominalQuota", {})
        for key, lending in amounts.get("lendingLimit", {}).items():
            quota = nominal.get(key, Decimal(0))
            if lending is not None and quota is not None and lending > quota:
                found.append(
                    (
                        f"{base}.lendingLimit.{key}",
                        f"lendingLimit {entry['lendingLimit'][key]} is above nominalQuota "
                        f"{entry['nominalQuota'].get(key, 0)}: a queue lends only what it has",
                    )
                )
    if len(spec.get("pools", [])) > MAX_FLAVORS:
        found.append(("spec.pools", f"a ClusterQueue holds at most {MAX_FLAVORS} flavors"))
    preemption = spec.get("preemption") or {}
    borrow = (preemption.get("borrowWithinCohort") or {}).get("policy", "Never")
    if preemption.get("reclaimWithinCohort", "Never") == "Never" and borrow != "Never":
        found.append(
            (
                "spec.preemption.borrowWithinCohort.policy",
                f"borrowWithinCohort {borrow} needs reclaimWithinCohort other than Never "
                "(Kueue rejects the combination)",
            )
        )
    return found


def _pool_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    levels = list(spec.get("topology") or [])
    if levels and not spec.get("nodeSelector"):
        found.append(
            (
                "spec.nodeSelector",
                "a pool with topology levels needs a nodeSelector "
                "(Kueue: at least one nodeLabel is required when topology is set)",
            )
        )
    for index, level in enumerate(levels):
        if level in levels[:index]:
            found.append((f"spec.topology[{index}]", f"topology level {level} is listed twice"))
        if level == "kubernetes.io/hostname" and index != len(levels) - 1:
            found.append(
                (f"spec.topology[{index}]", "kubernetes.io/hostname can only be the lowest level")
            )
    for index, toleration in enumerate(spec.get("tolerations") or []):
        exists = toleration.get("operator") == "Exists"
        if not toleration.get("key") and not exists:
            found.append(
                (f"spec.tolerations[{index}].operator", "an empty key needs operator Exists")
            )
        if exists and toleration.get("value"):
            found.append((f"spec.tolerations[{index}].value", "operator Exists takes no value"))
    return found


def resource_problems(resource: DesiredResource, naming: Naming) -> list[ValidationProblem]:
    found: list[tuple[str, str]] = limit_problems(resource, naming)
    if resource.kind == "Queue":
        found += _queue_problems(resource)
        name = naming.cluster_name(resource.name)
        if not _DNS_LABEL.match(name) or len(name) > 63:
            found.append(("metadata.name", f"ClusterQueue name {name!r} is not a DNS-1123 label"))
    elif resource.kind == "Project":
        namespace = naming.namespace(resource.name)
        if not _DNS_LABEL.match(namespace) or len(namespace) > 63:
            found.append(
                (
                    "metadata.name",
                    f"namespace {namespace!r} is not a DNS-1123 label (at most "
                    "63 characters, lower case, digits and '-'): shorten the name or the prefix",
                )
            )
    elif resource.kind == "Quota":
        for key, value in (resource.spec.get("limits") or {}).items():
            if key in ("gpu", "cpu", "memory") and _amount(value) is None:
                found.append((f"spec.limits.{key}", f"{value!r} is not a non-negative quantity"))
    elif resource.kind == "TrainingJob":
        found += job_problems(resource, naming)
    elif resource.kind == "ResourcePool":
        name = naming.cluster_name(resource.name)
        if not _DNS_LABEL.match(name) or len(name) > 63:
            found.append(("metadata.name", f"ResourceFlavor name {name!r} is not a DNS-1123 label"))
        found += _pool_problems(resource.spec)
    return [ValidationProblem(resource.address, field, message) for field, message in found]


def instance_problems(resources: list[DesiredResource]) -> list[ValidationProblem]:
    pools = {r.name for r in resources if r.kind == "ResourcePool"}
    problems: list[ValidationProblem] = []
    quotas: dict[tuple[str | None, str], str] = {}
    quota_resources: dict[tuple[str | None, str], DesiredResource] = {}
    for resource in resources:
        if resource.kind == "Queue":
            for index, entry in enumerate(resource.spec.get("pools", [])):
                if entry.get("pool") not in pools:
                    problems.append(
                        ValidationProblem(
                            resource.address,
                            f"spec.pools[{index}].pool",
                            f"pool {entry.get('pool')} is not declared on this provider "
                            "instance, so its ResourceFlavor would not exist",
                        )
                    )
        if resource.kind == "Quota":
            key = (resource.project, resource.spec.get("queue", ""))
            if key in quotas:
                problems.append(
                    ValidationProblem(
                        resource.address,
                        "spec.queue",
                        f"{quotas[key]} already sets this project's quota on queue {key[1]}; "
                        "one Quota per project and queue (each owns the LocalQueue)",
                    )
                )
            quotas.setdefault(key, resource.address)
            quota_resources.setdefault(key, resource)
    problems += _running_jobs_problems(resources)
    queues = {r.name: r for r in resources if r.kind == "Queue"}
    pool_specs = {r.name: r.spec for r in resources if r.kind == "ResourcePool"}
    queue_specs = [queue.spec for queue in queues.values()]
    for queue in queues.values():
        problems += queue_size_problems(queue, pool_specs)
    for resource in resources:
        if resource.kind == "TrainingJob" and resource.spec.get("queue") in queues:
            queue_resource = queues[resource.spec["queue"]]
            quota = quota_resources.get((resource.project, resource.spec["queue"]))
            problems += job_fit_problems(
                resource, queue_resource.spec, pool_specs, queue_specs, quota
            )
        if resource.kind == "TrainingJob":
            queue = resource.spec.get("queue", "")
            if (resource.project, queue) not in quotas:
                problems.append(
                    ValidationProblem(
                        resource.address,
                        "spec.queue",
                        f"project {resource.project} has no Quota on queue {queue}, so its "
                        "namespace has no LocalQueue and Kueue would never admit the job",
                    )
                )
    return problems + evaluation_fit_problems(resources, quota_resources)


def _running_jobs_problems(resources: list[DesiredResource]) -> list[ValidationProblem]:
    """runningJobs is Kueue's pod count on the project's ClusterQueue: exact while every
    job of the project on that queue is one pod, refused when one has several nodes."""
    limited = {
        (r.project, r.spec.get("queue")): r
        for r in resources
        if r.kind == "Quota" and (r.spec.get("limits") or {}).get("runningJobs") is not None
    }
    problems = []
    queues = {r.name: r.spec for r in resources if r.kind == "Queue"}
    topology = {r.name for r in resources if r.kind == "ResourcePool" and r.spec.get("topology")}
    for (_, queue), quota in sorted(limited.items(), key=lambda item: item[1].address):
        pools = [entry.get("pool") for entry in (queues.get(queue) or {}).get("pools", [])]
        if len(pools) > 1 and topology & set(pools):
            problems.append(
                ValidationProblem(
                    quota.address,
                    "spec.limits.runningJobs",
                    f"queue {queue} has several pools, some with topology: Kueue counts "
                    "pods per pool, and counting them across pools takes a flavor without "
                    "topology, which a topology-aware job cannot use; remove runningJobs "
                    "(limit gpu, cpu or memory instead)",
                )
            )
    for job in resources:
        if job.kind != "TrainingJob":
            continue
        quota = limited.get((job.project, job.spec.get("queue")))
        nodes = int((job.spec.get("resources") or {}).get("nodes", 1))
        if quota is not None and nodes > 1:
            problems.append(
                ValidationProblem(
                    quota.address,
                    "spec.limits.runningJobs",
                    f"{job.address} runs on {nodes} nodes: Kubernetes (Kueue) counts running "
                    "jobs as pods, one per node, so it would count as "
                    f"{nodes} jobs; remove runningJobs from this Quota (limit gpu, cpu or "
                    "memory instead) or run the job on one node",
                )
            )
    return problems
