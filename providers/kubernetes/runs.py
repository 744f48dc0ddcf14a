"""The JobProvider side of the kubernetes provider: submit, cancel and read runs (logs
and accounting in history.py).

Mixed into KubernetesProvider (which supplies `client`, `naming`, `field_manager`, `force`
and `context`). Submitting applies the attempt's Job (jobs.py), then records the attempt
in the address's run ledger; submitting the same attempt again changes nothing. Reading
joins ledger, Jobs, Kueue Workloads and pods into timelines (timeline.py). Requests:

- `runs(address)`: the ledger, the address's Jobs, the namespace's Workloads, plus one
  list of the address's pods when an attempt not yet recorded as finished has a Job that
  is not suspended (a suspended Job has no pods);
- `observe_jobs` for many addresses: one list of ledgers and one of Jobs across
  namespaces, plus one Workload list per namespace (paged) and one pod list (per
  namespace, or one across namespaces when several need it) among the namespaces holding
  attempts whose facts are not yet recorded in the ledger: unfinished, or finished since
  trainform last wrote;
- `accounting(since)`: one list of ledgers and one of Jobs across namespaces, plus one
  Workload list per namespace (paged) and one pod list across namespaces when an
  attempt's facts are not yet recorded;
- `read_log`: the ledger, the attempt's pods, its Job, one log read per pod that has
  started; with no pods left, one S3 read of the archive (logs.py).

Every write (the submit of a new attempt, a cancel) first records in the ledger the facts
of each attempt of the address seen finished (`final`: times, waits, cause, hosts, last
step) and archives its pods' log to S3, so timelines and logs outlive Jobs and pods.
Checkpoints and evaluation metrics are read from S3 through the objectstore provider's
S3Checkpoints when the prefix is s3://; an attempt's last step is the newest checkpoint
written while it ran, unless the ledger recorded it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from trainform.providers.base import DesiredResource, Observation, ObserveRequest
from trainform.providers.errors import PermanentProviderError, ProviderError
from trainform.providers.jobs import (
    AttemptStatus,
    CheckpointStatus,
    EvaluationStatus,
    JobLaunch,
    RunPhase,
    RunStatus,
)
from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.history import RunHistory
from trainform.providers.kubernetes.job_names import service_name
from trainform.providers.kubernetes.jobs import (
    job_manifest,
    ledger_entries,
    ledger_entry,
    ledger_manifest,
    ledger_name,
    owner_job,
    run_location,
)
from trainform.providers.kubernetes.kinds import (
    CONFIG_MAP,
    JOB,
    SERVICE,
    WORKLOAD,
    WORKLOAD_PRIORITY_CLASS,
    ApiKind,
)
from trainform.providers.kubernetes.launch_reads import read_placement
from trainform.providers.kubernetes.logs import (
    archive_location,
    pods_text,
    write_archive,
)
from trainform.providers.kubernetes.naming import (
    ADDRESS_HASH_LABEL,
    KIND_LABEL,
    Naming,
    address_of,
    short_hash,
)
from trainform.providers.kubernetes.placement import Placement
from trainform.providers.kubernetes.pods import headless_service
from trainform.providers.kubernetes.priority_classes import shared_class
from trainform.providers.kubernetes.queue_positions import QueuePositions
from trainform.providers.kubernetes.requeues import last_step, resolve_runs, starts_from_latest
from trainform.providers.kubernetes.timeline import (
    POD,
    attempt_status,
    final_facts,
    pods_by_job,
)
from trainform.providers.local.status import run_to_json

WORKLOAD_PAGE = 500


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _same_attempt(entry: dict[str, Any], launch: JobLaunch) -> bool:
    return (
        entry.get("runId") == launch.run_id
        and entry.get("attempt") == launch.attempt
        and entry.get("kind") == launch.kind
        and entry.get("suite") == launch.suite
    )


class KubernetesJobs(RunHistory):
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
        placement, queue_limit = self._placement(launch)
        max_seconds = min(
            (limit for limit in (launch.max_runtime, queue_limit) if limit), default=None
        )
        manifest = job_manifest(
            self.naming, launch, placement, self._priority_class(launch), max_seconds
        )
        existing = self.client.get(JOB, manifest["metadata"]["name"], namespace)
        if existing is not None and not self.naming.owns(existing, launch.address):
            raise PermanentProviderError(
                f"cannot submit {launch.address}: Job {namespace}/"
                f"{manifest['metadata']['name']} exists and is not this trainform's"
            )
        finished = self._finalize(namespace, launch.address, entries)
        if existing is None:
            if launch.nodes > 1:
                metadata = manifest["metadata"]
                service = headless_service(
                    metadata["name"],
                    namespace,
                    self.naming.labels(launch.address, "TrainingJob"),
                    self.naming.annotations(launch.address),
                )
                self.client.apply(service, self.field_manager, self.force)
            self.client.apply(manifest, self.field_manager, self.force)
        entries.append(ledger_entry(launch, _now()))
        self.client.apply(
            ledger_manifest(self.naming, launch.address, namespace, entries),
            self.field_manager,
            self.force,
        )
        self._clean(namespace, finished)
        return {"runId": launch.run_id, "attempt": launch.attempt}

    def _clean(self, namespace: str, finished: list[str]) -> None:
        """Delete the Jobs (and their headless Services) of attempts whose facts the ledger
        now holds: a finished Job has nothing left to say, and Kueue and quotas count only
        what is admitted, but an API server keeps every object until someone deletes it."""
        for name in finished:
            self.client.delete(JOB, name, namespace)
            self.client.delete(SERVICE, service_name(name), namespace)

    def _placement(self, launch: JobLaunch) -> tuple[Placement, int | None]:
        return read_placement(self.client, self.naming, launch, self._namespace_of(launch.address))

    def _priority_class(self, launch: JobLaunch) -> str:
        """The queue's own WorkloadPriorityClass when the job runs at its default priority,
        else the shared class of that value (priority_classes.py: marked with the manager,
        no address; deleted with a TrainingJob or Queue once no Job names it)."""
        queue_class = self.naming.cluster_name(launch.queue)
        found = self.client.get(WORKLOAD_PRIORITY_CLASS, queue_class)
        if found is not None and found.get("value") == launch.priority:
            return queue_class
        shared = shared_class(self.naming, launch.priority)
        self.client.apply(shared, self.field_manager, self.force)
        return str(shared["metadata"]["name"])

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
            procs_per_node=resources.get("procsPerNode") or 0,
        )
        return job_manifest(self.naming, launch, Placement(()), None, launch.max_runtime)

    # cancelling ------------------------------------------------------------------------

    def cancel(self, address: str, run_id: str | None = None) -> None:
        namespace = self._namespace_of(address)
        ledger = self.client.get(CONFIG_MAP, ledger_name(address), namespace)
        if ledger is None or not self.naming.owns(ledger, address):
            return
        entries = ledger_entries(ledger)
        jobs = self._jobs(namespace, address)
        victims = []
        for entry in entries:
            if entry.get("cancelled") or (run_id is not None and entry.get("runId") != run_id):
                continue
            job = jobs.get(str(entry.get("job")))
            if job is None or attempt_status(entry, job, None).phase.finished:
                continue  # finished, or its Job was deleted outside trainform (failed)
            entry["cancelled"], entry["cancelledAt"] = True, _now()
            victims.append(str(entry["job"]))
        recorded = self._finalize(namespace, address, entries, jobs)  # before pods go
        for name in victims:
            self.client.delete(JOB, name, namespace)
            self.client.delete(SERVICE, service_name(name), namespace)
        if victims or recorded:
            self.client.apply(
                ledger_manifest(self.naming, address, namespace, entries),
                self.field_manager,
                self.force,
            )
        self._clean(namespace, [name for name in recorded if name not in victims])

    # recording finished attempts -------------------------------------------------------

    def _finalize(
        self,
        namespace: str,
        address: str,
        entries: list[dict[str, Any]],
        jobs: dict[str, dict[str, Any]] | None = None,
    ) -> list[str]:
        """Record in `entries` the facts of each attempt seen finished and archive its
        log to S3 (an attempt whose archive cannot be written is left for the next write).
        The names of the Jobs whose attempts were recorded (still present)."""
        pending = [e for e in entries if not isinstance(e.get("final"), dict)]
        if not pending:
            return []
        jobs = self._jobs(namespace, address) if jobs is None else jobs
        workloads = self._workloads_by_job(self._workloads_in(namespace))
        mine = workloads.get(namespace, {})
        pods = (
            pods_by_job(self._pods(namespace, address)) if self._needs_pods(pending, jobs) else {}
        )
        store = self._store()
        checkpoints: dict[str, list[CheckpointStatus]] = {}
        changed: list[str] = []
        for entry in pending:
            name = str(entry.get("job"))
            status = attempt_status(entry, jobs.get(name), mine.get(name), pods.get(name))
            if not status.phase.finished:
                continue
            run_id = str(entry.get("runId"))
            location = run_location(str(entry.get("checkpointPrefix") or ""), run_id)
            if entry.get("kind") != "eval" and location.startswith("s3://") and store:
                if run_id not in checkpoints:
                    try:
                        checkpoints[run_id] = self._checkpoints(location) or []
                    except ProviderError:
                        checkpoints[run_id] = []  # read from the checkpoints later instead
                status.last_step = last_step(status, checkpoints[run_id])
                resolve_runs(status.runs, checkpoints[run_id], starts_from_latest(jobs.get(name)))
            archive = archive_location(entry)
            if archive and store is not None and pods.get(name):
                try:
                    text = pods_text(self.client, pods[name], status.nodes, True)
                    write_archive(self._s3(), archive, text)
                except ProviderError:
                    continue  # the pods still hold it: the next write tries again
                entry["logArchive"] = archive
            facts = final_facts(status)
            facts["pool"] = self._pool(mine.get(name))
            entry["final"] = facts
            if name in jobs:
                changed.append(name)
        return changed

    # reading ---------------------------------------------------------------------------

    def _store(self) -> Any:
        return (self.context.object_store if self.context else None) or None

    def _s3(self) -> Any:
        """One S3 client for the provider's object store, made on first use."""
        made = getattr(self, "_s3_client", None)
        if made is None:
            from trainform.providers.objectstore.client import make_client

            made = self._s3_client = make_client(self._store())
        return made

    def _jobs(self, namespace: str, address: str) -> dict[str, dict[str, Any]]:
        selector = f"{self.naming.selector},{ADDRESS_HASH_LABEL}={short_hash(address)}"
        return {
            job["metadata"]["name"]: job
            for job in self.client.list(JOB, selector, namespace)
            if self.naming.owns(job, address)
        }

    def _pods(self, namespace: str | None, address: str | None = None) -> list[dict[str, Any]]:
        """Pods of this instance's Jobs (of `address` only, when given): one list."""
        selector = self.naming.selector
        if address is not None:
            selector += f",{ADDRESS_HASH_LABEL}={short_hash(address)}"
        return self.client.list(POD, selector, namespace)

    @staticmethod
    def _needs_pods(entries: list[dict[str, Any]], jobs: dict[str, dict[str, Any]]) -> bool:
        """Whether an attempt not yet recorded has a Job that may have pods."""
        for entry in entries:
            job = jobs.get(str(entry.get("job")))
            if job is not None and not isinstance(entry.get("final"), dict):
                if not (job.get("spec") or {}).get("suspend", False):
                    return True
        return False

    def runs(self, address: str) -> list[RunStatus]:
        namespace = self._namespace_of(address)
        ledger = self.client.get(CONFIG_MAP, ledger_name(address), namespace)
        if ledger is None or not self.naming.owns(ledger, address):
            return []
        entries = ledger_entries(ledger)
        jobs = self._jobs(namespace, address)
        workloads = self._workloads_by_job(self._workloads_in(namespace))
        pods = self._pods(namespace, address) if self._needs_pods(entries, jobs) else []
        return self._statuses(entries, jobs, workloads.get(namespace, {}), pods_by_job(pods))

    def _workloads_in(self, namespace: str) -> list[dict[str, Any]]:
        """Kueue's Workloads in one of this instance's namespaces, paged (never every
        Workload of the cluster)."""
        return self.client.list(WORKLOAD, "", namespace, page=WORKLOAD_PAGE)

    @staticmethod
    def _workloads_by_job(workloads: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for workload in workloads:
            job = owner_job(workload)
            namespace = (workload.get("metadata") or {}).get("namespace", "")
            if job:
                found.setdefault(namespace, {})[job] = workload
        return found

    def _live_reads(
        self,
        ledgers: list[dict[str, Any]],
        jobs: dict[tuple[str, str], dict[str, Any]],
        namespaces: set[str] | None,
    ) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
        """Workloads by namespace and Job, and pods by namespace, for the attempts of
        `ledgers` not yet recorded (in `namespaces` only, when given): one list of each
        per namespace that needs it, one across namespaces when several do."""
        workload_spaces: set[str] = set()
        pod_spaces: set[str] = set()
        for ledger in ledgers:
            namespace = (ledger.get("metadata") or {}).get("namespace", "")
            if namespaces is not None and namespace not in namespaces:
                continue
            entries = ledger_entries(ledger)
            mine = {
                str(e.get("job")): jobs[(namespace, str(e.get("job")))]
                for e in entries
                if (namespace, str(e.get("job"))) in jobs
            }
            if any(
                not isinstance(e.get("final"), dict) and str(e.get("job")) in mine for e in entries
            ):
                workload_spaces.add(namespace)
            if self._needs_pods(entries, mine):
                pod_spaces.add(namespace)
        workloads = self._workloads_by_job(
            [w for space in sorted(workload_spaces) for w in self._workloads_in(space)]
        )
        pods: dict[str, list[dict[str, Any]]] = {}
        listed = []
        if len(pod_spaces) == 1:
            [only] = pod_spaces
            listed = self._pods(only)
        elif pod_spaces:
            listed = self._pods(None)
        for pod in listed:
            pods.setdefault(pod["metadata"].get("namespace", ""), []).append(pod)
        return workloads, pods

    def _all_jobs(self) -> dict[tuple[str, str], dict[str, Any]]:
        jobs: dict[tuple[str, str], dict[str, Any]] = {}
        for job in self.client.list(JOB, self.naming.selector):
            metadata = job["metadata"]
            jobs[(metadata.get("namespace", ""), metadata["name"])] = job
        return jobs

    def _ledgers(self) -> list[dict[str, Any]]:
        selector = f"{self.naming.selector},{KIND_LABEL}=TrainingJob"
        return [
            obj
            for obj in self.client.list(CONFIG_MAP, selector)
            if address_of(obj) and self.naming.owns(obj, address_of(obj))
        ]

    def observe_jobs(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        ledgers = {
            ((obj.get("metadata") or {}).get("namespace"), address_of(obj)): obj
            for obj in self._ledgers()
        }
        jobs = self._all_jobs()
        asked = {self._namespace_of(request.address) for request in requests}
        wanted = [
            ledgers[(self._namespace_of(r.address), r.address)]
            for r in requests
            if (self._namespace_of(r.address), r.address) in ledgers
        ]
        workloads, pods = self._live_reads(wanted, jobs, asked)
        observations = {}
        for request in requests:
            ledger = ledgers.get((self._namespace_of(request.address), request.address))
            if ledger is None:
                observations[request.address] = Observation(exists=False)
                continue
            namespace = ledger["metadata"].get("namespace", "")
            mine = {name: job for (ns, name), job in jobs.items() if ns == namespace}
            runs = self._statuses(
                ledger_entries(ledger),
                mine,
                workloads.get(namespace, {}),
                pods_by_job(pods.get(namespace, [])),
            )
            observations[request.address] = Observation(
                exists=True, live=None, status={"runs": [run_to_json(run) for run in runs]}
            )
        return observations

    def _statuses(
        self,
        entries: list[dict[str, Any]],
        jobs: dict[str, dict[str, Any]],
        workloads: dict[str, dict[str, Any]],
        pods: dict[str, list[dict[str, Any]]] | None = None,
        keep: Callable[[RunStatus], bool] | None = None,
    ) -> list[RunStatus]:
        runs: dict[str, RunStatus] = {}
        prefixes: dict[str, str] = {}
        waiting: list[tuple[AttemptStatus, dict[str, Any]]] = []
        latest: set[int] = set()  # attempts whose pods resume from the latest checkpoint
        pods = pods or {}
        for entry in entries:
            run_id = str(entry.get("runId"))
            run = runs.setdefault(run_id, RunStatus(run_id=run_id))
            job_name = str(entry.get("job"))
            status = attempt_status(
                entry, jobs.get(job_name), workloads.get(job_name), pods.get(job_name)
            )
            if entry.get("kind") == "eval":
                run.evaluations.append(
                    EvaluationStatus(
                        str(entry.get("suite")), run_id, status.phase, {}, status.reason
                    )
                )
            else:
                run.attempts.append(status)
                if starts_from_latest(jobs.get(job_name)):
                    latest.add(id(status))
                prefixes.setdefault(run_id, str(entry.get("checkpointPrefix") or ""))
                if status.phase == RunPhase.QUEUED and job_name in workloads:
                    waiting.append((status, workloads[job_name]))
        self._place_queued(waiting, workloads)
        kept = []
        for run_id, run in runs.items():
            run.attempts.sort(key=lambda a: a.attempt)
            if keep is not None and not keep(run):
                continue
            location = run_location(prefixes.get(run_id, ""), run_id)
            run.output_dir = f"{location}/output" if location else ""
            self._read_storage(run, location)
            for attempt in run.attempts:
                if attempt.last_step is None:
                    attempt.last_step = last_step(attempt, run.checkpoints)
                resolve_runs(attempt.runs, run.checkpoints, id(attempt) in latest)
            kept.append(run)
        return kept

    def _place_queued(
        self,
        waiting: list[tuple[AttemptStatus, dict[str, Any]]],
        workloads: dict[str, dict[str, Any]],
    ) -> None:
        """Each queued attempt's position in its queue (queue_positions.py)."""
        if not waiting:
            return
        keys = {}
        for attempt, workload in waiting:
            metadata = workload.get("metadata") or {}
            keys[(str(metadata.get("namespace", "")), str(metadata.get("name", "")))] = attempt
        if getattr(self, "_positions", None) is None:
            self._positions = QueuePositions(self.client)
        for key, found in self._positions.of(list(workloads.values()), set(keys)).items():
            keys[key].queue_position = found.position
            keys[key].queue_pending = found.pending
            keys[key].queue_position_source = found.source

    def _checkpoints(self, location: str) -> list[CheckpointStatus] | None:
        store = self._store()
        if not location.startswith("s3://") or store is None:
            return None
        from trainform.providers.objectstore.checkpoints import S3Checkpoints

        return list(S3Checkpoints(location, client=self._s3()).list())

    def _read_storage(self, run: RunStatus, location: str) -> None:
        store = self._store()
        if not location.startswith("s3://") or store is None:
            return
        from trainform.providers.objectstore.checkpoints import S3Checkpoints

        try:
            checkpoints = S3Checkpoints(location, client=self._s3())
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

    def _pool(self, workload: dict[str, Any] | None) -> str:
        """The trainform pool Kueue admitted the Workload on (its first flavor)."""
        admission = ((workload or {}).get("status") or {}).get("admission") or {}
        for assignment in admission.get("podSetAssignments") or []:
            for flavor in (assignment.get("flavors") or {}).values():
                return self.naming.spec_name(str(flavor)) or str(flavor)
        return ""
