"""Guards against plans that delete a large part of the platform by accident.

A plan that deletes (without `--destroy` or `--allow-mass-delete`):
- more than `mass_delete_share` of everything in state (and at least `mass_delete_minimum`);
- every resource of one project while the Project itself stays (a team folder removed or
  emptied by mistake; deleting the Project in the same plan says it is meant);
- every resource of one provider instance (at least two),
is refused, naming the guard that fired.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from trainform.planner.plan_model import Action, ResourceChange


def project_of(address: str) -> str | None:
    """The project a resource address belongs to (`Kind/project/name`), or the Project's own."""
    parts = address.split("/")
    if len(parts) == 3:
        return parts[1]
    if parts[0] == "Project" and len(parts) == 2:
        return parts[1]
    return None


def delete_guard_problems(
    changes: Sequence[ResourceChange],
    recorded: Mapping[str, Any],
    share: float,
    minimum: int,
) -> list[str]:
    deleted = {c.address for c in changes if c.action is Action.DELETE}
    if not deleted or not recorded:
        return []
    problems = []
    if len(deleted) >= minimum and len(deleted) > share * len(recorded):
        problems.append(
            f"mass-delete guard: the plan deletes {len(deleted)} of {len(recorded)} resources "
            f"in state (more than {share:.0%}); if that is intended, pass --allow-mass-delete"
        )
    by_project: dict[str, list[str]] = defaultdict(list)
    by_instance: dict[str, list[str]] = defaultdict(list)
    for address, resource in recorded.items():
        project = project_of(address)
        if project is not None and not address.startswith("Project/"):
            by_project[project].append(address)
        for instance in resource.providers:
            by_instance[instance].append(address)
    for project, addresses in sorted(by_project.items()):
        if f"Project/{project}" in deleted or not all(a in deleted for a in addresses):
            continue
        if len(addresses) < 2:
            continue
        problems.append(
            f"project guard: the plan deletes every resource of project {project} "
            f"({len(addresses)}: {', '.join(sorted(addresses)[:5])}"
            f"{', ...' if len(addresses) > 5 else ''}) while Project/{project} stays; if the "
            "team's specs were removed on purpose, pass --allow-mass-delete (or delete the "
            "Project in the same change)"
        )
    for instance, addresses in sorted(by_instance.items()):
        if len(addresses) >= 2 and all(a in deleted for a in addresses):
            problems.append(
                f"provider guard: the plan deletes every resource on provider instance "
                f"{instance} ({len(addresses)}); if that is intended, pass --allow-mass-delete"
            )
    return problems
