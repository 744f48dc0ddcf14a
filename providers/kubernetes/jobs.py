"""Training and evaluation attempts as batch/v1 Jobs admitted by Kueue, and their status.

An attempt becomes one Indexed Job in the project's namespace, named as job_names.py says
(valid and bounded for any job name): completions = parallelism = nodes (one pod per
node), the accelerator of the pools it fits requested and limited per pod (placement.py),
the launch contract's environment per pod and, for a command other than torchrun running
several processes per node, the launcher of launcher.py (pods.py), created with
`suspend: true` and the label `kueue.x-k8s.io/queue-name` (the project's LocalQueue named
as the queue), so Kueue unsuspends it when it admits its Workload. A training attempt with
checkpoints on S3 starts through resume_entry.py, which resumes from the run's latest
valid checkpoint at every start (a preempted attempt that Kueue admits again too).
`backoffLimit: 0`: trainform, not the Job controller, decides on retries (planner/jobs.py
resumes a failed attempt from its latest valid checkpoint as a new attempt, a new Job).

Each TrainingJob address has a run ledger, the ConfigMap `trainform-runs-<address hash>`
in its namespace, listing every attempt trainform submitted (run id, attempt, kind, suite,
Job name, checkpoint prefix, resumed from, queue, size, submitted and cancelled times, and
once trainform has seen it finished, its timeline facts `final` and its log archive).
Status joins the ledger with the Jobs, their Kueue Workloads and their pods
(providers/kubernetes/timeline.py):

- ledger says cancelled               -> cancelled
- Job gone                            -> failed, "Job deleted outside trainform"
- Job condition Complete / Failed     -> succeeded / failed (the pod's or the condition's
                                         words, with a cause class)
- Workload deactivated by Kueue       -> failed / cancelled, in Kueue's words (deactivation.py)
- Job suspended                       -> queued; why: the Workload's QuotaReserved or
                                         Admitted message, Evicted / Preempted (requeued by
                                         Kueue) with Kueue's message, or no Workload yet
- otherwise                           -> running

Checkpoint layout and environment: providers/jobs.py; the checkpoint, output and metrics
locations are under `<checkpoint prefix>/<run id>/` (s3://, read by the objectstore
provider's S3Checkpoints). Pure; the provider does the I/O.
"""

from __future__ import annotations

import json
from typing import Any

from trainform.providers.jobs import JobLaunch
from trainform.providers.kubernetes import pods
from trainform.providers.kubernetes.job_names import job_name, service_name
from trainform.providers.kubernetes.launcher import launcher_command
from trainform.providers.kubernetes.naming import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    Naming,
    dns_label,
    label_safe,
    short_hash,
)
from trainform.providers.kubernetes.placement import DEFAULT_GPU, Placement
from trainform.providers.kubernetes.resume_entry import resume_command, resumes_at_start
from trainform.providers.kubernetes.timeline import (  # noqa: F401 - kept here for their importers
    DELETED,
    attempt_status,
    why_pending,
)
from trainform.providers.launch import Launch, launch_of
from trainform.providers.local.environment import dataset_location, parameter_text, variable_suffix
from trainform.specs.quantity import parse_quantity

RUN_LABEL = "trainform.dev/run-id"
ATTEMPT_LABEL = "trainform.dev/attempt"
LAUNCH_LABEL = "trainform.dev/launch"
SPEC_HASH_LABEL = "trainform.dev/spec-hash"
SUITE_ANNOTATION = "trainform.dev/suite"
LEDGER_KEY = "attempts.json"
CONTAINER = pods.CONTAINER
NODE_INDEX = {  # which node of the run this pod is: the Indexed Job's completion index
    "name": "TRAINFORM_NODE_INDEX",
    "valueFrom": {
        "fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        }
    },
}


def launch_contract(launch: JobLaunch) -> Launch:
    """The attempt's launch (providers/launch.py): nodes, processes per node, torchrun."""
    return launch_of({"command": list(launch.command), "resources": launch.resources()})


def ledger_name(address: str) -> str:
    return f"trainform-runs-{short_hash(address)}"


def run_location(launch_or_prefix: JobLaunch | str, run_id: str) -> str:
    prefix = (
        launch_or_prefix.checkpoint_prefix
        if isinstance(launch_or_prefix, JobLaunch)
        else launch_or_prefix
    )
    return f"{prefix.rstrip('/')}/{run_id}" if prefix else ""


def job_environment(launch: JobLaunch) -> dict[str, str]:
    """TRAINFORM_* as providers/jobs.py documents them, then the launch's own env."""
    run_dir = run_location(launch, launch.model_run or launch.run_id)
    env = {
        "TRAINFORM_JOB": launch.address,
        "TRAINFORM_RUN_ID": launch.run_id,
        "TRAINFORM_ATTEMPT": str(launch.attempt),
        "TRAINFORM_NODES": str(launch.nodes),
        "TRAINFORM_CHECKPOINT_DIR": run_dir,
        "TRAINFORM_OUTPUT_DIR": f"{run_dir}/output" if run_dir else "",
        "TRAINFORM_PROGRESS_FILE": "/tmp/trainform/progress.json",
        "TRAINFORM_RESUME_FROM": f"{run_dir}/{launch.resume_from}" if launch.resume_from else "",
        "TRAINFORM_RESUME_STEP": (launch.resume_from or "step-0").removeprefix("step-"),
    }
    if launch.checkpoint_interval is not None:
        env["TRAINFORM_CHECKPOINT_INTERVAL"] = str(launch.checkpoint_interval)
    if launch.keep_last is not None:
        env["TRAINFORM_KEEP_LAST"] = str(launch.keep_last)
    for dataset in launch.datasets:
        location = dataset_location({"document": dataset.document, "version": dataset.version})
        suffix = variable_suffix(dataset.name)
        env[f"TRAINFORM_DATASET_{suffix}"] = location
        env[f"TRAINFORM_DATASET_{suffix}_URI"] = location
    if launch.kind == "eval":
        suite = (launch.suite or "").rsplit("/", 1)[-1]
        env["TRAINFORM_MODEL_DIR"] = f"{run_dir}/output" if run_dir else ""
        env["TRAINFORM_METRICS_FILE"] = (
            f"{run_dir}/evaluations/{suite}/metrics.json" if run_dir else ""
        )
        env["TRAINFORM_EVAL_SUITE"] = launch.suite or ""
    for name, value in launch.parameters.items():
        env[f"TRAINFORM_PARAM_{variable_suffix(name)}"] = parameter_text(value)
    env["TRAINFORM_PARAMETERS"] = json.dumps(launch.parameters, sort_keys=True)
    env.update(launch.env)
    return env


def job_manifest(
    naming: Naming,
    launch: JobLaunch,
    placement: Placement,
    priority_class: str | None,
    max_seconds: int | None = None,
) -> dict[str, Any]:
    """The attempt's Job; `placement` names the pools it may run on (placement.py) and
    `max_seconds` the shortest of the job's, queue's and quota's time limits: the Job's
    `activeDeadlineSeconds`, the one time limit (pods.py says why not Kueue's)."""
    namespace = naming.namespace(launch.project or "")
    name = job_name(launch)
    run_labels = attempt_labels(launch)
    template = pod_template(naming, launch, placement, name, namespace, run_labels)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job_metadata(naming, launch, name, namespace, run_labels, priority_class),
        "spec": job_spec(launch, template, max_seconds),
    }


def attempt_labels(launch: JobLaunch) -> dict[str, str]:
    """The labels naming the run, attempt, launch kind and spec hash, on the Job and its pods."""
    return {
        RUN_LABEL: label_safe(launch.run_id),
        ATTEMPT_LABEL: str(launch.attempt),
        LAUNCH_LABEL: launch.kind,
        SPEC_HASH_LABEL: short_hash(json.dumps(launch.to_json(), sort_keys=True)),
    }


def job_metadata(
    naming: Naming,
    launch: JobLaunch,
    name: str,
    namespace: str,
    run_labels: dict[str, str],
    priority_class: str | None,
) -> dict[str, Any]:
    """The Job's metadata: its owner, run, queue and priority labels."""
    labels = {
        **naming.labels(launch.address, "TrainingJob"),
        **run_labels,
        QUEUE_NAME_LABEL: dns_label(launch.queue),
    }
    if priority_class:
        labels[PRIORITY_CLASS_LABEL] = priority_class
    annotations = naming.annotations(launch.address)
    if launch.suite:
        annotations[SUITE_ANNOTATION] = launch.suite
    return {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations,
    }


def job_spec(
    launch: JobLaunch, template: dict[str, Any], max_seconds: int | None
) -> dict[str, Any]:
    """The suspended Indexed Job's spec: one pod per node, no Job-controller retries, and
    for a distributed job one failed pod fails the group (pods.failure_policy)."""
    spec: dict[str, Any] = {
        "suspend": True,
        "completionMode": "Indexed",
        "completions": launch.nodes,
        "parallelism": launch.nodes,
        "backoffLimit": 0,
        "podFailurePolicy": pods.failure_policy(launch_contract(launch)),
        "template": template,
    }
    if max_seconds:
        spec["activeDeadlineSeconds"] = max_seconds
    return spec


def pod_template(
    naming: Naming,
    launch: JobLaunch,
    placement: Placement,
    name: str,
    namespace: str,
    run_labels: dict[str, str],
) -> dict[str, Any]:
    """The pod template: labels, topology annotations, the container and its placement."""
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [main_container(launch, placement, name, namespace)],
    }
    if launch.nodes > 1:
        pod_spec["subdomain"] = service_name(name)
    per_node = launch.gpus // max(launch.nodes, 1)
    found = pods.affinity(name, placement, launch.nodes, per_node)
    if found:
        pod_spec["affinity"] = found
    template_metadata: dict[str, Any] = {
        "labels": {**naming.labels(launch.address, "TrainingJob"), **run_labels}
    }
    topology = pods.topology_annotations(placement, launch.nodes)
    if topology:
        template_metadata["annotations"] = topology
    return {"metadata": template_metadata, "spec": pod_spec}


def main_container(
    launch: JobLaunch, placement: Placement, name: str, namespace: str
) -> dict[str, Any]:
    """The attempt's container: image, command (a launcher per pod when a command other
    than torchrun runs several processes per node), environment and resources."""
    contract = launch_contract(launch)
    command = list(launch.command)
    if contract.distributed and not contract.torchrun and contract.procs_per_node > 1:
        command = launcher_command(command)
    if resumes_at_start(launch.kind, launch.resume, launch.checkpoint_prefix):
        command = resume_command(command)  # the latest valid checkpoint at every start
    return {
        "name": CONTAINER,
        "image": launch.image,
        "command": command,
        "env": [{"name": k, "value": v} for k, v in sorted(job_environment(launch).items())]
        + [NODE_INDEX]
        + pods.launch_environment(name, namespace, contract),
        "resources": container_resources(launch, placement),
    }


def container_resources(launch: JobLaunch, placement: Placement) -> dict[str, dict[str, str]]:
    """Requests and limits per pod; the accelerator of the pools it fits, split per node."""
    per_node = launch.gpus // max(launch.nodes, 1)
    requests: dict[str, str] = {"cpu": str(launch.cpu), "memory": str(launch.memory)}
    limits: dict[str, str] = {"memory": str(launch.memory)}
    if per_node:
        gpu_name = placement.resource_name or DEFAULT_GPU
        requests[gpu_name] = limits[gpu_name] = str(per_node)
    return {"requests": requests, "limits": limits}


def ledger_entry(launch: JobLaunch, submitted_at: str) -> dict[str, Any]:
    return {
        "runId": launch.run_id,
        "attempt": launch.attempt,
        "kind": launch.kind,
        "suite": launch.suite,
        "job": job_name(launch),
        "checkpointPrefix": launch.checkpoint_prefix,
        "resumeFrom": launch.resume_from or "",
        "submittedAt": submitted_at,
        "cancelled": False,
        "queue": launch.queue,
        "nodes": launch.nodes,
        "procsPerNode": launch_contract(launch).procs_per_node,
        "gpus": launch.gpus,
        "cpus": _cpus(launch.cpu) * launch.nodes,
        "eligibleAt": launch.eligible_at,
    }


def _cpus(text: str) -> float:
    try:
        return float(parse_quantity(str(text)))
    except ValueError:
        return 0.0


def ledger_manifest(
    naming: Naming, address: str, namespace: str, entries: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ledger_name(address),
            "namespace": namespace,
            "labels": naming.labels(address, "TrainingJob"),
            "annotations": naming.annotations(address),
        },
        "data": {LEDGER_KEY: json.dumps(entries, sort_keys=True)},
    }


def ledger_entries(config_map: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not config_map:
        return []
    try:
        entries = json.loads((config_map.get("data") or {}).get(LEDGER_KEY, "[]"))
    except ValueError:
        return []
    return entries if isinstance(entries, list) else []


def owner_job(workload: dict[str, Any]) -> str | None:
    for owner in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("kind") == "Job":
            return str(owner.get("name"))
    return None
