"""Plan-time checks of a TrainingJob on Kubernetes that only the API server would make, and
only after Kueue admitted the job: the names of its Job, headless Service and pod
hostnames (job_names.py), and environment variables the launch contract sets itself.

- names: job_names.py makes every name valid for any job name (cut and hashed), so a
  problem here means that scheme broke: a diagnostic at `metadata.name` instead of a Job
  or pods the server refuses;
- `spec.env` naming a variable the launch contract sets for a distributed job (PET_* for
  torchrun; MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE,
  NODE_RANK, GROUP_RANK otherwise) is refused at `spec.env.<NAME>`: two definitions of one
  variable in a container hide one another, and the per-pod launcher reads NODE_RANK and
  LOCAL_WORLD_SIZE, which must be the contract's.
Called by kueue_rules.resource_problems. Pure; no I/O.
"""

from __future__ import annotations

from trainform.providers.base import DesiredResource
from trainform.providers.kubernetes.job_names import attempt_job_name, name_problems
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.pods import contract_names
from trainform.providers.launch import launch_of

PREVIEW_RUN = "r-ffffffff"  # run ids are 8 hex digits in Job names; any gives the same length


def job_problems(resource: DesiredResource, naming: Naming) -> list[tuple[str, str]]:
    """(field, message) of every check above the TrainingJob `resource` fails."""
    spec = resource.spec
    nodes = int((spec.get("resources") or {}).get("nodes") or 1)
    namespace = naming.namespace(resource.project or "")
    job = attempt_job_name(resource.name, PREVIEW_RUN, 1, nodes)
    found = [
        ("metadata.name", f"{problem}: the API server would refuse the job's objects")
        for problem in name_problems(job, nodes, namespace)
    ]
    launch = launch_of(spec)
    reserved = contract_names(launch)
    for name in sorted(set(spec.get("env") or {}) & reserved):
        found.append(
            (
                f"spec.env.{name}",
                f"{name} is set by trainform for every process of this job ({launch.nodes} "
                f"nodes x {launch.procs_per_node} processes: the launch contract, "
                "docs/distributed.md); remove it from spec.env",
            )
        )
    return found
