"""Orphans: objects a provider instance marks as trainform's (its ownership label, tag or
comment naming the manager and an address) that neither the state nor the specs know.

`find_orphans` is shared by drift (every configured instance) and plan (the instances its
resources use, so a plan never contacts an instance nothing in it needs). One listing per
instance (`Provider.list_owned`, itself batched), so the number of requests does not grow
with the number of objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainform.planner.plan_model import PlanFinding
from trainform.planner.session import ProviderSet
from trainform.planner.state import ResourceState


@dataclass(frozen=True)
class Orphan:
    instance: str
    instance_type: str
    address: str
    kind: str

    @property
    def import_command(self) -> str:
        """`trainform import ADDRESS ID`: the local provider's id is the address itself."""
        identifier = self.address if self.instance_type == "local" else "ID"
        return f"trainform import {self.address} {identifier}"


def find_orphans(
    providers: ProviderSet,
    instances: Iterable[str],
    known: set[str],
    recorded: Mapping[str, ResourceState] | None = None,
) -> list[Orphan]:
    """Owned objects of `instances` whose address is not `known`, nor one that a `recorded`
    entry adopted under another address (Provider.adopted_identifiers)."""
    types = {p.name: p.type for p in providers.config.providers}
    found = []
    for name in sorted(set(instances)):
        provider = providers.get(name)
        adopted = {
            identifier
            for resource in (recorded or {}).values()
            if name in resource.providers
            for identifier in provider.adopted_identifiers(resource.outputs.get(name, {}))
        }
        for address, kind in provider.list_owned():
            if address not in known and address not in adopted:
                found.append(Orphan(name, types.get(name, ""), address, kind))
    return found


def orphan_findings(
    providers: ProviderSet, desired: dict[str, Any], recorded: dict[str, Any]
) -> list[PlanFinding]:
    """Plan findings for the orphans of the instances the plan's resources use."""
    used = {
        name for resource in [*desired.values(), *recorded.values()] for name in resource.providers
    }
    return [
        PlanFinding(
            orphan.address,
            "orphaned",
            "warning",
            f"owned by trainform on {orphan.instance} but unknown to state and specs: declare "
            f"it and run `{orphan.import_command}` (or `trainform import --from "
            f"{orphan.instance}`), or delete it",
        )
        for orphan in find_orphans(providers, used, set(desired) | set(recorded), recorded)
    ]
