"""What the plan says of a multi-node job's gang admission on Kubernetes.

Kueue admits a Workload only when the quota of all its pods can be reserved at once; what
happens when an admitted job's pods do not all become ready (a lost node, an image that
never pulls) is Kueue's `waitForPodsReady`, a setting of its controller's configuration
that trainform cannot read. So a plan with a multi-node job says what it relies on, as a
warning that is not drift (docs/distributed.md, "Gang admission"). Pure; the Kubernetes
provider's `plan_warnings` calls it.
"""

from __future__ import annotations

from trainform.providers.base import DesiredResource
from trainform.providers.launch import launch_of


def gang_admission_warnings(resource: DesiredResource) -> list[str]:
    if resource.kind != "TrainingJob":
        return []
    launch = launch_of(resource.spec)
    if launch.nodes < 2:
        return []
    return [
        f"a {launch.nodes}-node job is admitted all at once by Kueue, but whether a job "
        "whose pods do not all become ready is evicted and requeued depends on Kueue's "
        "waitForPodsReady, which trainform cannot read: make sure it is enabled "
        "(docs/distributed.md, Gang admission)"
    ]
