"""Objects another manager holds where a resource of the specs should be.

A provider that finds, at a resource's place, an object managed by someone else (an admin,
another trainform instance) reports it absent with a `managed-by-other` finding naming the
manager (providers/local/provider.py). Creating it would fail at apply ("managed by
'admin'"), so plan refuses at once: one problem per resource, naming its spec location,
the manager, and what to do (adopt it with `trainform import`, or leave it to its manager).
Called by make_plan (plan.py) after the refresh; drift reports the same as a finding.
"""

from __future__ import annotations

from collections.abc import Collection

from trainform.planner.desired import DesiredItem
from trainform.providers.base import MANAGED_BY_OTHER, Observation


def adopt_commands(address: str, identifier: str, recorded: bool) -> str:
    """The commands that adopt it: state forgets what it recorded first (import refuses an
    address already in state)."""
    adopt = f"trainform import {address} {identifier}"
    return f"trainform state rm {address} && {adopt}" if recorded else adopt


def foreign_object_problems(
    observations: dict[tuple[str, str], Observation],
    desired: dict[str, DesiredItem],
    recorded: Collection[str],
) -> list[str]:
    problems = []
    for (address, provider), observation in sorted(observations.items()):
        item = desired.get(address)
        if item is None or observation.exists:
            continue
        for finding in observation.findings:
            if finding.kind != MANAGED_BY_OTHER:
                continue
            identifier = str(finding.evidence.get("identifier") or address)
            command = adopt_commands(address, identifier, address in recorded)
            problems.append(
                f"{item.location}: cannot create {address} on {provider}: {finding.message}; "
                f"to manage it from these specs, adopt it with `{command}` "
                "(then plan shows what would change), or remove it from the specs and leave "
                "it to its manager"
            )
    return problems
