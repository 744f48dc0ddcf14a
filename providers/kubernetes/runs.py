"""The JobProvider side of the kubernetes provider: submit, cancel and read runs.

Mixed into KubernetesProvider (which supplies `client`, `naming`, `field_manager`, `force`
and `context`). Submitting applies the attempt's Job (jobs.py), then records the attempt
in the address's run ledger; submitting the same attempt again changes nothing. Reading
joins ledger, Jobs and Kueue Workloads: `runs(address)` costs three requests (ledger,
the address's Jobs, the namespace's Workloads); `observe_jobs` for many addresses costs
one list of ledgers and one of Jobs across namespaces, plus one Workload list per
namespace that still has an unfinished attempt. Checkpoints and evaluation metrics are
read from S3 through the objectstore provider's S3Checkpoints when the prefix is s3://.
"""

from __future__ import annotations

import datetime
from typing import Any

from providers.base import DesiredResource, Observation, ObserveRequest
from providers.errors import PermanentProviderError, ProviderError
from providers.jobs import (
    CheckpointStatus,
    EvaluationStatus,
    JobLaunch,
    RunPhase,
    RunStatus,
)
from providers.kubernetes.client import KubeClient
from providers.kubernetes.jobs import (
    attempt_status,
    job_manifest,
    ledger_entries,
    ledger_entry,
    ledger_manifest,
    ledger_name,
    owner_job,
    run_location,
)
from providers.kubernetes.kinds import (
    CLUSTER_QUEUE,
    CONFIG_MAP,
    JOB,
    KUEUE,
    WORKLOAD,
    WORKLOAD_PRIORITY_CLASS,
    ApiKind,
)
from providers.kubernetes.manifests import DEFAULT_GPU
from providers.kubernetes.naming import (
    ADDRESS_HASH_LABEL,
    KIND_LABEL,
    Naming,
    address_of,
    short_hash,
)
from providers.local.status import run_to_json

PRIORITY_KIND = "Priority"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _same_attempt(entry: dict[str, Any], launch: JobLaunch) -> bool:
    return (
        entry.get("runId") == launch.run_id
        and entry.get("attempt") == launch.attempt
        and entry.get("kind") == launch.kind
        and entry.get("suite") == launch.suite
    )


class KubernetesJobs:
    client: KubeClient
    naming: Naming
    field_manager: str
    force: bool
    context: Any

    def job_kinds(self) -> set[ApiKind]:
        return {CONFIG_MAP, JOB}

    def _namespace_of(self, address: str) -> str:
        parts = address.split("/")
        if len(parts) != 3:
            raise PermanentProviderError(
                f"cannot run {address}: a job on Kubernetes belongs to a project (a namespace)"
            )
        return self.naming.namespace(parts[1])

    # submitting ------------------------------------------------------------------------

    def submit(self, launch: JobLaunch) -> dict[str, Any]:
        if not launch.image:
            raise PermanentProviderError(
                f"cannot submit {launch.address}: the launch names no container image "
                "(JobLaunch.image; the image must be pinned before a run is submitted)"
            )
        namespace = self._namespace_of(launch.address)
        ledger = self.client.get(CONFIG_MAP, ledger_name(launch.address), namespace)
        if ledger is not None and not self.naming.owns(ledger, launch.address):
            raise PermanentProviderError(
                f"cannot submit {launch.address}: its run ledger {namespace}/"
                f"{ledger_name(launch.address)} belongs to someone else"
            )
        entries = ledger_entries(ledger)
        if any(_same_attempt(entry, launch) for entry in entries):
            return {"runId": launch.run_id, "attempt": launch.attempt}
        manifest = job_manifest(
            self.naming, launch, self._gpu_name(launch.queue), self._priority_class(launch)
        )
        existing = self.client.get(JOB, manifest["metadata"]["name"], namespace)
        if existing is not None and not self.naming.owns(existing, launch.address):
            raise PermanentProviderError(
                f"cannot submit {launch.address}: Job {namespace}/"
                f"{manifest['metadata']['name']} exists and is not this trainform's"
            )
        if existing is None:
            self.client.apply(manifest, self.field_manager, self.force)
        entries.append(ledger_entry(launch, _now()))
        self.client.apply(
            ledger_manifest(self.naming, launch.address, namespace, entries),
            self.field_manager,
            self.force,
        )
        return {"runId": launch.run_id, "attempt": launch.attempt}

    def _gpu_name(self, queue: str) -> str:
        cluster_queue = self.client.get(CLUSTER_QUEUE, self.naming.cluster_name(queue)) or {}
        for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
            for resource in group.get("coveredResources") or []:
                if resource not in ("cpu", "memory"):
                    return str(resource)
        return DEFAULT_GPU

    def _priority_class(self, launch: JobLaunch) -> str:
        """The queue's own WorkloadPriorityClass when the job runs at its default priority,
        else a shared class for that value (`<namePrefix>trainform-priority-<n>`, marked
        with the manager, never listed as owned by an address, never deleted)."""
        queue_class = self.naming.cluster_name(launch.queue)
        found = self.client.get(WORKLOAD_PRIORITY_CLASS, queue_class)
        if found is not None and found.get("value") == launch.priority:
            return queue_class
        value = f"m{-launch.priority}" if launch.priority < 0 else str(launch.priority)
        name = self.naming.cluster_name(f"trainform-priority-{value}")
        labels = self.naming.labels("trainform-priorities", PRIORITY_KIND)
        self.client.apply(
            {
                "apiVersion": KUEUE,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name, "labels": labels},
                "value": launch.priority,
                "description": f"trainform job priority {launch.priority}",
            },
            self.field_manager,
            self.force,
        )
        return name

    def preview_job(self, resource: DesiredResource) -> dict[str, Any]:
        """The Job a TrainingJob's first attempt becomes, for plans (run id and image are
        known only at submission)."""
        spec = resource.spec
        resources = spec["resources"]
        checkpoint = spec.get("checkpoint") or {}
        launch = JobLaunch(
            address=resource.address,
            run_id="r-pending",
            attempt=1,
            kind="train",
            project=resource.project,
            queue=spec["queue"],
            priority=spec.get("priority") or 0,
            command=list(spec["command"]),
            code_dir=None,
            parameters=dict(spec.get("parameters", {})),
            env=dict(spec.get("env", {})),
            datasets=[],
            cpu=resources["cpu"],
            memory=resources["memory"],
            gpus=resources["acceleratorsPerNode"] * resources["nodes"],
            nodes=resources["nodes"],
            checkpoint_prefix=checkpoint.get("prefix", ""),
            image=f"{spec['image']} (pinned at submission)",
        )
        return job_manifest(self.naming, launch, DEFAULT_GPU, None)

    # cancelling ------------------------------------------------------------------------

    def cancel(self, address: str, run_id: str | None = None) -> None:
        namespace = self._namespace_of(address)
        ledger = self.client.get(CONFIG_MAP, ledger_name(address), namespace)
        if ledger is None or not self.naming.owns(ledger, address):
            return
        entries = ledger_entries(ledger)
        jobs = self._jobs(namespace, address)
        changed = False
        for entry in entries:
            if entry.get("cancelled") or (run_id is not None and entry.get("runId") != run_id):
                continue
            job = jobs.get(str(entry.get("job")))
            if job is None or attempt_status(entry, job, None).phase.finished:
                continue  # finished, or its Job was deleted outside trainform (failed)
            self.client.delete(JOB, str(entry["job"]), namespace)
            entry["cancelled"] = True
            changed = True
        if changed:
            self.client.apply(
                ledger_manifest(self.naming, address, namespace, entries),
                self.field_manager,
                self.force,
            )

    # reading ---------------------------------------------------------------------------

    def _jobs(self, namespace: str, address: str) -> dict[str, dict[str, Any]]:
        selector = f"{self.naming.selector},{ADDRESS_HASH_LABEL}={short_hash(address)}"
        return {
            job["metadata"]["name"]: job
            for job in self.client.list(JOB, selector, namespace)
            if self.naming.owns(job, address)
        }

    def runs(self, address: str) -> list[RunStatus]:
        namespace = self._namespace_of(address)
        ledger = self.client.get(CONFIG_MAP, ledger_name(address), namespace)
        if ledger is None or not self.naming.owns(ledger, address):
            return []
        jobs = self._jobs(namespace, address)
        workloads = self._workloads_by_job(self.client.list(WORKLOAD, "", namespace))
        return self._statuses(ledger_entries(ledger), jobs, workloads.get(namespace, {}))

    @staticmethod
    def _workloads_by_job(workloads: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for workload in workloads:
            job = owner_job(workload)
            namespace = (workload.get("metadata") or {}).get("namespace", "")
            if job:
                found.setdefault(namespace, {})[job] = workload
        return found

    def observe_jobs(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        selector = f"{self.naming.selector},{KIND_LABEL}=TrainingJob"
        ledgers = {
            ((obj.get("metadata") or {}).get("namespace"), address_of(obj)): obj
            for obj in self.client.list(CONFIG_MAP, selector)
        }
        jobs: dict[tuple[str, str], dict[str, Any]] = {}
        for job in self.client.list(JOB, self.naming.selector):
            metadata = job["metadata"]
            jobs[(metadata.get("namespace", ""), metadata["name"])] = job
        asked = {self._namespace_of(request.address) for request in requests}
        waiting = sorted(
            {
                namespace
                for (namespace, _), job in jobs.items()
                if namespace in asked and not attempt_status({}, job, None).phase.finished
            }
        )
        workloads: dict[str, dict[str, Any]] = {}
        if len(waiting) == 1:
            workloads = self._workloads_by_job(self.client.list(WORKLOAD, "", waiting[0]))
        elif waiting:  # one list across namespaces beats one per namespace
            workloads = self._workloads_by_job(self.client.list(WORKLOAD, ""))
        observations = {}
        for request in requests:
            ledger = ledgers.get((self._namespace_of(request.address), request.address))
            if ledger is None or not self.naming.owns(ledger, request.address):
                observations[request.address] = Observation(exists=False)
                continue
            namespace = ledger["metadata"].get("namespace", "")
            mine = {name: job for (ns, name), job in jobs.items() if ns == namespace}
            runs = self._statuses(ledger_entries(ledger), mine, workloads.get(namespace, {}))
            observations[request.address] = Observation(
                exists=True, live=None, status={"runs": [run_to_json(run) for run in runs]}
            )
        return observations

    def _statuses(
        self,
        entries: list[dict[str, Any]],
        jobs: dict[str, dict[str, Any]],
        workloads: dict[str, dict[str, Any]],
    ) -> list[RunStatus]:
        runs: dict[str, RunStatus] = {}
        prefixes: dict[str, str] = {}
        for entry in entries:
            run_id = str(entry.get("runId"))
            run = runs.setdefault(run_id, RunStatus(run_id=run_id))
            job_name = str(entry.get("job"))
            status = attempt_status(entry, jobs.get(job_name), workloads.get(job_name))
            if entry.get("kind") == "eval":
                run.evaluations.append(
                    EvaluationStatus(
                        str(entry.get("suite")), run_id, status.phase, {}, status.reason
                    )
                )
            else:
                run.attempts.append(status)
                prefixes.setdefault(run_id, str(entry.get("checkpointPrefix") or ""))
        for run_id, run in runs.items():
            run.attempts.sort(key=lambda a: a.attempt)
            location = run_location(prefixes.get(run_id, ""), run_id)
            run.output_dir = f"{location}/output" if location else ""
            self._read_storage(run, location)
        return list(runs.values())

    def _read_storage(self, run: RunStatus, location: str) -> None:
        store = (self.context.object_store if self.context else None) or None
        if not location.startswith("s3://") or store is None:
            return
        from providers.objectstore.checkpoints import S3Checkpoints

        try:
            checkpoints = S3Checkpoints(location, connection=store)
            run.checkpoints = list(checkpoints.list())
            latest = run.latest_valid_checkpoint()
            run.current_step = latest.step if latest else None
            for evaluation in run.evaluations:
                if evaluation.phase is RunPhase.SUCCEEDED:
                    metrics = checkpoints.metrics(evaluation.suite.rsplit("/", 1)[-1])
                    evaluation.metrics = dict(metrics or {})
        except ProviderError as exc:
            run.checkpoints = [
                CheckpointStatus("storage", 0, False, f"cannot read checkpoints: {exc}")
            ]
