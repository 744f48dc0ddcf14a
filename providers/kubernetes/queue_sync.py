"""Writes that keep a Queue's projects' ClusterQueues in step with the Queue.

A Queue's pools and admission policy (preemption, queueingStrategy, stopPolicy) are
fields of its projects' ClusterQueues (project_queues.py). `write_queue_policy` runs after
a Queue is applied and rewrites those fields on each of them, keeping each project's own
limits (read back from the ClusterQueue), so the Queue's planned change is what reaches
them. `with_live_queue_facts` gives a Quota its Queue's facts from the cluster when the
Queue has no outputs recorded (an import adopting the Quota before its Queue). Called by
provider.py.

The rewrite is the same write as the Quota's own: a server-side apply, by the same field
manager, of the whole ClusterQueue trainform manages (its marks and labels as last
applied, read back with applied.py, and the complete spec). A real API server keys field
ownership by manager *and* operation, so a merge patch here (an Update) would own these
fields apart from the Quota's Apply, and the Quota's next apply of a changed spec would
conflict with trainform itself; and a merge patch without nulls never removes a key the
Queue dropped (`maxPriorityThreshold`), where an apply that leaves it out removes it.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.base import DesiredResource
from trainform.providers.kubernetes.applied import applied_configuration
from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.discovery import live_queue_facts
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE
from trainform.providers.kubernetes.naming import Naming, address_of
from trainform.providers.kubernetes.project_queues import (
    QUEUE_LABEL,
    project_queue_name,
    project_queue_spec,
)
from trainform.providers.kubernetes.projection import quota_limits


def write_queue_policy(
    client: KubeClient,
    naming: Naming,
    field_manager: str,
    resource: DesiredResource,
    facts: dict[str, Any],
    force: bool,
) -> None:
    """Apply the queue's pools and admission policy onto each of its projects'
    ClusterQueues (their own limits kept), as the Queue's spec says."""
    cohort = naming.cluster_name(resource.name)
    for queue in client.list(CLUSTER_QUEUE, f"{naming.selector},{QUEUE_LABEL}={cohort}"):
        address = address_of(queue)
        if not address or not naming.owns(queue, address):
            continue
        project = address.split("/")[1] if address.count("/") == 2 else ""
        config = applied_configuration(queue, field_manager)
        metadata = config["metadata"]
        metadata["labels"] = {
            **(metadata.get("labels") or {}),
            **naming.labels(address, "Quota"),
            QUEUE_LABEL: cohort,
        }
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}),
            **naming.annotations(address),
        }
        limits = quota_limits(queue)
        config["spec"] = project_queue_spec(naming, facts, resource.name, project, limits)
        client.apply(config, field_manager, force)


def with_live_queue_facts(
    client: KubeClient, naming: Naming, resource: DesiredResource
) -> DesiredResource:
    """The Quota with its Queue's facts read from the cluster."""
    queue = str(resource.spec.get("queue", ""))
    name = project_queue_name(naming, queue, resource.project or "")
    facts = live_queue_facts(client, naming, queue, client.get(CLUSTER_QUEUE, name))
    return DesiredResource(
        resource.address,
        resource.kind,
        resource.name,
        resource.project,
        resource.document,
        {**resource.outputs_of_dependencies, f"Queue/{queue}": facts},
    )
