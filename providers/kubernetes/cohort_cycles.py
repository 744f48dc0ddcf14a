"""Cohort cycles among the Queues of one kubernetes instance, refused at plan.

Each Queue is a Kueue Cohort named as the queue, and `spec.cohort` becomes its
`parentName` (manifests.py). A `cohort` naming the queue itself, or a chain of queues
whose cohorts lead back to the first, makes a cycle of Cohorts. Kueue accepts the objects
(its Cohort webhook does not look at parents) but its cache marks every ClusterQueue under
a cycle inactive (pkg/cache/hierarchy/cycle.go HasCycle; pkg/cache/scheduler/snapshot.go,
inactive reason "HasCycle"), so no job of any of those queues is ever admitted. A
`cohort` naming another queue without a cycle is a hierarchy Kueue supports (the queue's
Cohort under the other's). Pure; called by provider.py.
"""

from __future__ import annotations

from trainform.providers.base import DesiredResource, ValidationProblem

SOURCE = (
    "Kueue marks every ClusterQueue under a Cohort cycle inactive (pkg/cache/hierarchy/cycle.go)"
)


def cohort_cycle_problems(resources: list[DesiredResource]) -> list[ValidationProblem]:
    """One problem at `spec.cohort` of every queue on a cycle, naming the whole cycle."""
    parents = {r.name: str(r.spec.get("cohort") or "") for r in resources if r.kind == "Queue"}
    problems = []
    for name in sorted(parents):
        path = [name]
        while parents.get(path[-1]) and parents[path[-1]] not in path:
            path.append(parents[path[-1]])
        if parents.get(path[-1]) != name:
            continue  # no cycle back to this queue (it may lead into one elsewhere)
        shown = " -> ".join([*path, name])
        problems.append(
            ValidationProblem(
                f"Queue/{name}",
                "spec.cohort",
                f"cohort {parents[name]!r} makes a cycle of Cohorts ({shown}): each Queue is "
                f"the Kueue Cohort of its name, and {SOURCE}, so none of these queues would "
                "admit a job; name a cohort that is not one of these queues",
            )
        )
    return problems
