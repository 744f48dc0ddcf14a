"""What a resource reads from the outputs of the resources it depends on, as the engine
hands them over (`DesiredResource.outputs_of_dependencies`): a Queue the accelerator
resource name of each of its pools, a Quota its Queue's facts. Pure; called by
provider.py.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.base import DesiredResource


def dependency_outputs(resource: DesiredResource, prefix: str, instance: str) -> dict[str, dict]:
    """Outputs of the dependencies whose address starts with `prefix`, by their name. The
    engine records a resource's outputs per provider instance ({instance: {...}}); a bare
    mapping (a provider's own call) is read as it is."""
    found: dict[str, dict[str, Any]] = {}
    for address, outputs in resource.outputs_of_dependencies.items():
        if not address.startswith(prefix):
            continue
        mine = outputs.get(instance) if instance else None
        found[address.rsplit("/", 1)[-1]] = mine if isinstance(mine, dict) else outputs
    return found


def gpu_names(resource: DesiredResource, instance: str) -> dict[str, str]:
    """The accelerator resource name of each pool the queue admits onto."""
    return {
        pool: str(outputs["resourceName"])
        for pool, outputs in dependency_outputs(resource, "ResourcePool/", instance).items()
        if outputs.get("resourceName")
    }


def queue_facts_of(resource: DesiredResource, instance: str) -> dict[str, Any]:
    """The outputs of the quota's Queue (its pools, accelerators and policy)."""
    for outputs in dependency_outputs(resource, "Queue/", instance).values():
        return outputs
    return {}
