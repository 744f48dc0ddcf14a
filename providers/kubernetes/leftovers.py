"""Objects a resource wrote that its spec no longer renders: seen, planned and deleted.

A Quota with `runningJobs` on a queue of several pools renders a ResourceFlavor of its own,
`<queue>-<project>-jobs` (project_queues.py); without `runningJobs` it does not, and the
flavor its earlier apply wrote would stay behind. So:

- observe reports every object carrying the resource's address that neither its render
  nor the objects its last apply recorded (its outputs) include as an unsettled finding
  (`object-left-over`): the plan updates the resource and drift shows it;
- the plan's change lists each live object of the resource that the new render drops as
  a step (`dropped_steps`);
- a write of a Quota deletes its left-over flavors after its ClusterQueue no longer lists
  them (the write applies the ClusterQueue first), and waits until they are gone, since
  Kueue keeps a flavor a ClusterQueue lists (terminating.py).

Only objects with this instance's mark and the resource's address are ever deleted.
Called by provider.py.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.base import Finding, Observation
from trainform.providers.kubernetes.client import KubeClient, describe
from trainform.providers.kubernetes.kinds import RESOURCE_FLAVOR
from trainform.providers.kubernetes.naming import ADDRESS_HASH_LABEL, Naming, short_hash
from trainform.providers.kubernetes.terminating import is_terminating, wait_gone

Ref = tuple[str, str, str]  # (kind, namespace, name)


def _ref(obj: dict[str, Any]) -> Ref:
    metadata = obj.get("metadata") or {}
    return (str(obj.get("kind")), metadata.get("namespace") or "", metadata.get("name", ""))


def left_over(
    naming: Naming, address: str, rendered: list[dict[str, Any]], live: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The live objects of `address` that `rendered` does not include."""
    wanted = {_ref(obj) for obj in rendered}
    return [obj for obj in live if naming.owns(obj, address) and _ref(obj) not in wanted]


def left_over_finding(obj: dict[str, Any], address: str) -> Finding:
    return Finding(
        "object-left-over",
        f"{describe(obj)} was written for {address}, whose spec no longer renders it: "
        "apply deletes it",
        {"object": describe(obj)},
        unsettled=True,
    )


def dropped_steps(
    address: str, observation: Observation, rendered: list[dict[str, Any]]
) -> list[str]:
    """Plan lines for the live flavors of `address` (the observation's `written`) that the
    new render leaves out, but for those already reported as left over."""
    wanted = {(obj["kind"], obj["metadata"]["name"]) for obj in rendered}
    reported = {f.evidence.get("object") for f in observation.findings}
    return [
        f"delete {entry['kind']} {entry['name']}: {address} no longer renders it (after "
        "its ClusterQueue stops listing it, so Kueue lets it go)"
        for entry in observation.status.get("written") or []
        if entry.get("kind") == "ResourceFlavor"
        and (entry["kind"], entry["name"]) not in wanted
        and f"ResourceFlavor {entry['name']}" not in reported
    ]


def prune_flavors(
    client: KubeClient, naming: Naming, address: str, rendered: list[dict[str, Any]], wait: float
) -> None:
    """Delete the flavors `address` wrote that `rendered` leaves out; wait until gone."""
    selector = f"{naming.selector},{ADDRESS_HASH_LABEL}={short_hash(address)}"
    listed = client.list(RESOURCE_FLAVOR, selector)
    mine = [f for f in listed if naming.spec_name(f["metadata"]["name"]) is not None]
    found = left_over(naming, address, rendered, mine)
    for obj in found:
        if not is_terminating(obj):
            client.delete(RESOURCE_FLAVOR, obj["metadata"]["name"])
    wait_gone(client, found, wait)
