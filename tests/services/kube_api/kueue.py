"""A Kueue controller stand-in: small, synchronous, and faithful to Kueue's documented rules.

Off until a test calls `api.kueue.start()` (the `kueue` fixture does, and stops it after
the test). While on, it reconciles after every write request the server answered without
error (and when a test calls `reconcile()`), under the store lock, so a test sees the
outcome as soon as its request returns: no threads, no sleeps. It writes through the
server's own verbs (schema, CEL and managedFields apply; field manager `kueue`).

What it does, after Kueue's controllers (pkg/controller/jobs/job, pkg/controller/core,
pkg/scheduler):
- a suspended batch/v1 Job with the `kueue.x-k8s.io/queue-name` label (or annotation) and
  no Workload gets one (kueue_workloads.workload_for), with the priority of its
  WorkloadPriorityClass (label `kueue.x-k8s.io/priority-class`) or PriorityClass;
- pending Workloads are scheduled per ClusterQueue in priority, then creation order:
  under StrictFIFO the first one that does not fit blocks the ones behind it, under
  BestEffortFIFO it does not. A Workload whose LocalQueue or ClusterQueue is missing, or
  whose ClusterQueue is inactive or does not select its namespace, is Inadmissible. One that
  fits (kueue_flavors.assign, quota from kueue_quota) gets status.admission and the
  QuotaReserved and Admitted conditions; one that does not gets QuotaReserved False
  (reason Pending) with Kueue's message;
- an admitted Workload's Job is unsuspended, its pod template given the flavor's
  nodeLabels as nodeSelector and its tolerations;
- maximum execution time and deactivation: a Workload past its Job's
  `kueue.x-k8s.io/max-exec-time-seconds` of admitted time is deactivated, an inactive one
  evicted and never queued again, an evicted one's Job suspended and its quota released
  (kueue_deactivation.py);
- a Job that completes or fails finishes its Workload (condition Finished) and releases
  its quota; a deleted Job's Workload is deleted (garbage collection of the owned object);
- a minimal Job controller (job_controller.py) creates the pods of running Jobs, subject
  to ResourceQuota admission (refusals land in `jobs.refused`);
- ClusterQueues, ResourceFlavors and Topologies carry Kueue's `resource-in-use`
  finalizer (kueue_finalizers.py): a deleted ClusterQueue stays Terminating (inactive)
  while Workloads hold quota in it, a deleted flavor while a ClusterQueue lists it, a
  deleted Topology while a flavor names it; ClusterQueue and LocalQueue status report
  pending, reserving and admitted counts and the Active condition.
- with fair sharing on (`fair_sharing`, Kueue's fairSharing.enable; on by default, as
  trainform assumes), the pending Workloads of ClusterQueues in a Cohort tree are tried
  in the order of Kueue's DominantResourceShare tournament (kueue_fairsharing.py);
- with Node objects, admission on a topology flavor needs a topology assignment, the
  started Job's pods are gated and ungated onto their domains (kueue_tas.py), and a
  kube-scheduler stand-in binds pods to nodes (nodes.py).
- a Workload that does not fit may preempt others (kueue_preemption.py: Kueue's classical
  preemption, as the flavor assigner and the preemptor decide it); the victims are
  evicted (Evicted and Preempted conditions, kueue_eviction.py) and, as every evicted
  Workload, stopped and requeued (kueue_deactivation.py step 3, their Job's original pod
  template restored); the preemptor waits ("Pending the preemption of n workload(s)") and
  is admitted in a later pass; a re-admitted Workload's Evicted and Preempted turn False.
Not modelled: admission checks, the mutating webhook that suspends Jobs on
create (tests create Jobs suspended, as trainform does).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tests.services.kube_api import deletion, kueue_eviction, kueue_tas, operations
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.job_controller import JobController
from tests.services.kube_api.kueue_deactivation import Deactivations
from tests.services.kube_api.kueue_fairsharing import fair_order, weights_of
from tests.services.kube_api.kueue_finalizers import settle
from tests.services.kube_api.kueue_flavors import assign
from tests.services.kube_api.kueue_preemption import Preemptor, admitted, message, queue_path
from tests.services.kube_api.kueue_quota import Tree
from tests.services.kube_api.kueue_status import queue_statuses
from tests.services.kube_api.kueue_visibility import order_key
from tests.services.kube_api.kueue_workloads import (
    PRIORITY_LABEL,
    WORKLOAD_FINALIZER,
    condition,
    is_true,
    queue_name,
    workload_for,
    workload_name,
)
from tests.services.kube_api.nodes import PodScheduler
from tests.services.kube_api.target import Target

if TYPE_CHECKING:
    from tests.services.kube_api.server import KubeAPI

KUEUE = "kueue.x-k8s.io"
AGENT = "kueue/v0.14.0"
WATCHED = {
    ("batch", "jobs"),
    ("", "namespaces"),
    ("", "pods"),
    ("scheduling.k8s.io", "priorityclasses"),
    *(
        (KUEUE, plural)
        for plural in (
            "workloads",
            "clusterqueues",
            "localqueues",
            "cohorts",
            "resourceflavors",
            "topologies",
            "workloadpriorityclasses",
        )
    ),
}


def reserving(workload: dict[str, Any]) -> bool:
    """Holds quota: QuotaReserved, not Finished and active (Kueue's workload controller
    drops an inactive Workload from its cache as it does a finished one, Update event)."""
    active = (workload.get("spec") or {}).get("active", True) is not False
    return is_true(workload, "QuotaReserved") and not is_true(workload, "Finished") and active


def _finished(job: dict[str, Any]) -> tuple[str, str] | None:
    for item in (job.get("status") or {}).get("conditions") or []:
        if item.get("status") != "True":
            continue
        if item.get("type") == "Complete":
            return "Succeeded", "Job finished successfully"
        if item.get("type") == "Failed":
            return "Failed", item.get("message") or "Job failed"
    return None


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector against labels (nil selects nothing, {} everything)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for term in selector.get("matchExpressions") or []:
        key, operator, values = term.get("key"), term.get("operator"), term.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


class KueueController(Deactivations):
    """The stand-in; `running` says whether the server reconciles after writes."""

    def __init__(self, api: KubeAPI) -> None:
        self.api = api
        self.running = False
        self.errors: list[str] = []  # writes the server refused: a bug of the stand-in
        self.jobs = JobController(api)  # pods for the Jobs it unsuspends
        self.scheduler = PodScheduler(api)  # binds them to nodes (nodes.py)
        self.fair_sharing = True  # Kueue's fairSharing.enable, as trainform assumes it

    def start(self) -> None:
        self.running = True
        self.reconcile()

    def stop(self) -> None:
        self.running = False

    # -- reading and writing through the server's verbs --------------------------------

    def _target(
        self, group: str, plural: str, namespace: str | None, name: str | None, sub: str = ""
    ) -> Target:
        found = self.api.catalog().by_resource(group, plural)
        if found is None:
            raise LookupError(f"{plural}.{group} is not served")
        return Target(found, "v1beta2" if group == KUEUE else "v1", namespace, name, sub)

    def _items(self, group: str, plural: str) -> list[dict[str, Any]]:
        return self.api.store.items(group, plural, None)

    def _write(self, group: str, plural: str, obj: dict[str, Any], sub: str = "") -> None:
        metadata = obj["metadata"]
        target = self._target(group, plural, metadata.get("namespace"), metadata["name"], sub)
        body = copy.deepcopy(obj)
        body["apiVersion"] = target.api_version
        try:
            operations.update(self.api.store, target, body, {"fieldManager": "kueue"}, AGENT)
        except ApiError as error:
            self.errors.append(f"update {plural} {metadata['name']}: {error.message}")

    def _create(self, group: str, plural: str, obj: dict[str, Any]) -> None:
        target = self._target(group, plural, obj["metadata"].get("namespace"), None)
        try:
            operations.create(self.api.store, target, obj, {"fieldManager": "kueue"}, AGENT)
        except ApiError as error:
            self.errors.append(f"create {plural} {obj['metadata']['name']}: {error.message}")

    def _delete(self, group: str, plural: str, obj: dict[str, Any]) -> None:
        metadata = obj["metadata"]
        target = self._target(group, plural, metadata.get("namespace"), metadata["name"])
        try:
            deletion.delete(self.api.store, target, {}, {"propagationPolicy": "Background"})
        except ApiError as error:
            if error.code != 404:
                self.errors.append(f"delete {plural} {metadata['name']}: {error.message}")

    def _drop_finalizer(self, group: str, plural: str, obj: dict[str, Any], name: str) -> None:
        finalizers = obj["metadata"].get("finalizers") or []
        if name in finalizers:
            obj["metadata"]["finalizers"] = [f for f in finalizers if f != name]
            self._write(group, plural, obj)

    # -- the reconcile loop ------------------------------------------------------------

    def reconcile(self, after_write: bool = False) -> None:
        """Bring Workloads, Jobs and queues up to date (a few passes, until nothing moves);
        `after_write`: only if the write touched a kind Kueue watches."""
        store = self.api.store
        with store.lock:
            touched, store.kueue_touched = store.kueue_touched, set()
            if after_write and not touched & WATCHED:
                return
            for _ in range(8):
                before = store.revision
                self._jobs()
                self._deactivate()
                self._schedule()
                self._start_jobs()
                self.jobs.sync()
                kueue_tas.ungate(self.api)
                self.scheduler.bind()
                self._queues()
                if store.revision == before:
                    break
            store.kueue_touched.clear()  # its own writes, already reconciled

    def _jobs(self) -> None:
        jobs = {
            (j["metadata"]["namespace"], j["metadata"]["uid"]): j
            for j in self._items("batch", "jobs")
        }
        workloads = self._items(KUEUE, "workloads")
        owned = set()
        for workload in workloads:
            metadata = workload["metadata"]
            owner = next(
                (o for o in metadata.get("ownerReferences") or [] if o.get("kind") == "Job"), None
            )
            if owner is None:
                continue
            job = jobs.get((metadata["namespace"], owner["uid"]))
            if job is None:  # the owner is gone: garbage-collect the Workload
                self._drop_finalizer(KUEUE, "workloads", workload, WORKLOAD_FINALIZER)
                if not metadata.get("deletionTimestamp"):
                    self._delete(KUEUE, "workloads", workload)
                continue
            owned.add((metadata["namespace"], owner["uid"]))
            outcome = _finished(job)
            if outcome is not None and not is_true(workload, "Finished"):
                condition(workload, "Finished", "True", *outcome)
                self._write(KUEUE, "workloads", workload, "status")
                fresh = self.api.store.get(
                    KUEUE, "workloads", metadata["namespace"], metadata["name"]
                )
                if fresh is not None:
                    self._drop_finalizer(KUEUE, "workloads", fresh, WORKLOAD_FINALIZER)
        for key, job in jobs.items():
            spec = job.get("spec") or {}
            if key in owned or not queue_name(job) or not spec.get("suspend"):
                continue
            if job["metadata"].get("deletionTimestamp") or _finished(job) is not None:
                continue
            priority, reference = self._priority(job)
            if priority is None and reference is not None:
                continue  # a missing WorkloadPriorityClass: Kueue creates no Workload
            self._create(KUEUE, "workloads", workload_for(job, priority, reference))

    def _priority(self, job: dict[str, Any]) -> tuple[int | None, dict[str, str] | None]:
        name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if name:
            found = self.api.store.get(KUEUE, "workloadpriorityclasses", "", name)
            reference = {"group": KUEUE, "kind": "WorkloadPriorityClass", "name": name}
            return (int(found["value"]) if found else None), reference
        template = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
        name = template.get("priorityClassName")
        if name:
            found = self.api.store.get("scheduling.k8s.io", "priorityclasses", "", name)
            if found is not None:
                reference = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}
                return int(found.get("value", 0)), reference
        return 0, None

    def _inadmissible(
        self, workload: dict[str, Any], queues: dict[str, dict[str, Any]]
    ) -> tuple[str, str | None]:
        """Why the workload cannot be considered ('' if it can) and its ClusterQueue."""
        namespace = workload["metadata"]["namespace"]
        local_name = (workload.get("spec") or {}).get("queueName") or ""
        local = self.api.store.get(KUEUE, "localqueues", namespace, local_name)
        if local is None:
            return f"LocalQueue {local_name} doesn't exist", None
        queue_name_ = (local.get("spec") or {}).get("clusterQueue", "")
        queue = queues.get(queue_name_)
        if queue is None:
            return f"ClusterQueue {queue_name_} doesn't exist", None
        if not self._active(queue):
            return f"ClusterQueue {queue_name_} is inactive", None
        found = self.api.store.get("", "namespaces", "", namespace) or {"metadata": {}}
        labels = found["metadata"].get("labels") or {}
        if not selects((queue.get("spec") or {}).get("namespaceSelector"), labels):
            return "Workload namespace doesn't match ClusterQueue selector", None
        return "", queue_name_

    def _missing_flavors(self, queue: dict[str, Any]) -> list[str]:
        names = [
            flavor["name"]
            for group in (queue.get("spec") or {}).get("resourceGroups") or []
            for flavor in group.get("flavors") or []
        ]
        return [n for n in names if self.api.store.get(KUEUE, "resourceflavors", "", n) is None]

    def _active(self, queue: dict[str, Any]) -> bool:
        stop = (queue.get("spec") or {}).get("stopPolicy", "None")
        terminating = queue["metadata"].get("deletionTimestamp")
        return stop == "None" and not terminating and not self._missing_flavors(queue)

    def _schedule(self) -> None:
        queues = {q["metadata"]["name"]: q for q in self._items(KUEUE, "clusterqueues")}
        tree = Tree(list(queues.values()), self._items(KUEUE, "cohorts"))
        flavors = {f["metadata"]["name"]: f for f in self._items(KUEUE, "resourceflavors")}
        levels = {
            t["metadata"]["name"]: [
                level.get("nodeLabel") for level in (t.get("spec") or {}).get("levels") or []
            ]
            for t in self._items(KUEUE, "topologies")
        }
        placer = kueue_tas.placer_for(self.api, flavors, levels)
        workloads = self._items(KUEUE, "workloads")
        holding = [
            admitted(w) for w in workloads if reserving(w) and admitted(w).queue in tree.queues
        ]
        for each in holding:
            for key, value in each.usage.items():
                tree.add_usage(each.queue, key, value)
        preemptor = Preemptor(queues, tree, holding)
        pending = [
            w
            for w in workloads
            if not is_true(w, "QuotaReserved")
            and not is_true(w, "Finished")
            and (w.get("spec") or {}).get("active", True)
            and not w["metadata"].get("deletionTimestamp")
        ]
        pending.sort(key=order_key)  # Kueue's queue order (kueue_visibility.py)
        blocked: set[str] = set()
        preempted: set[tuple[str, str]] = set()  # targets of this cycle (no overlaps)
        for workload in self._order(pending, queues, tree, flavors, levels):
            problem, queue_name_ = self._inadmissible(workload, queues)
            if problem or queue_name_ is None:
                self._pending(workload, "Inadmissible", problem)
                continue
            if queue_name_ in blocked:
                continue  # StrictFIFO: behind a head that does not fit
            queue = queues[queue_name_]

            def oracle(
                flavor: str,
                resource: str,
                value: int,
                q: str = queue_name_,
                w: dict[str, Any] = workload,
            ) -> bool:
                return preemptor.may_preempt(w, q, (flavor, resource), value)

            outcome = assign(workload, queue, flavors, tree, levels, placer, oracle)
            if not outcome.fits:
                text = outcome.message
                if outcome.preempting:
                    text += self._preempt(workload, queue_name_, outcome, preemptor, preempted)
                self._pending(workload, "Pending", text)
                if (queue.get("spec") or {}).get(
                    "queueingStrategy", "BestEffortFIFO"
                ) == "StrictFIFO":
                    blocked.add(queue_name_)
                continue
            for key, value in outcome.usage.items():
                tree.add_usage(queue_name_, key, value)
            status = workload.setdefault("status", {})
            status["admission"] = {
                "clusterQueue": queue_name_,
                "podSetAssignments": outcome.pod_sets,
            }
            condition(
                workload,
                "QuotaReserved",
                "True",
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {queue_name_}",
            )
            kueue_eviction.readmit(workload)
            condition(workload, "Admitted", "True", "Admitted", "The workload is admitted")
            self._write(KUEUE, "workloads", workload, "status")

    def _order(
        self,
        pending: list[dict[str, Any]],
        queues: dict[str, dict[str, Any]],
        tree: Tree,
        flavors: dict[str, dict[str, Any]],
        levels: dict[str, list[str]],
    ) -> Iterable[dict[str, Any]]:
        """Pending Workloads in the order they are tried: by the fair-sharing tournament
        when fair sharing is on (kueue_fairsharing.py), else as sorted."""
        if not self.fair_sharing:
            return pending
        weights = weights_of([*queues.values(), *self._items(KUEUE, "cohorts")])
        return fair_order(
            pending,
            lambda w: self._inadmissible(w, queues)[1],
            tree,
            queues,
            flavors,
            levels,
            weights,
        )

    def _preempt(
        self,
        workload: dict[str, Any],
        queue: str,
        outcome: Any,
        preemptor: Preemptor,
        preempted: set[tuple[str, str]],
    ) -> str:
        """Evict what Kueue's preemptor picks for `workload` (scheduler.go: not when a
        target is already a target of this cycle); the text the pending message gets."""
        targets = preemptor.targets(workload, queue, outcome.usage, outcome.preempting)
        if not targets or any(t.workload.key in preempted for t in targets):
            return ""
        path = queue_path(preemptor.tree, queue)
        for target in targets:
            preempted.add(target.workload.key)
            victim = target.workload.obj
            said = message(
                workload, target.reason, path, queue_path(preemptor.tree, target.workload.queue)
            )
            if kueue_eviction.evict(victim, target.reason, said):
                self._write(KUEUE, "workloads", victim, "status")
        return f". Pending the preemption of {len(targets)} workload(s)"

    def _pending(self, workload: dict[str, Any], reason: str, message: str) -> None:
        if condition(workload, "QuotaReserved", "False", reason, message):
            self._write(KUEUE, "workloads", workload, "status")

    def _start_jobs(self) -> None:
        flavors = {f["metadata"]["name"]: f for f in self._items(KUEUE, "resourceflavors")}
        for workload in self._items(KUEUE, "workloads"):
            if not (is_true(workload, "Admitted") and reserving(workload)):
                continue
            if is_true(workload, "Evicted"):
                continue  # being stopped (kueue_deactivation.py), never started again
            metadata = workload["metadata"]
            owner = next(
                (o for o in metadata.get("ownerReferences") or [] if o.get("kind") == "Job"), None
            )
            job = (
                self.api.store.get("batch", "jobs", metadata["namespace"], owner["name"])
                if owner
                else None
            )
            if job is None or not (job.get("spec") or {}).get("suspend"):
                continue
            if job["metadata"]["uid"] != owner["uid"] or workload_name(job) != metadata["name"]:
                continue
            assignments = workload["status"]["admission"]["podSetAssignments"]
            spec = job["spec"]
            pod_spec = spec.setdefault("template", {}).setdefault("spec", {})
            for flavor_name in sorted({f for a in assignments for f in a["flavors"].values()}):
                flavor_spec = (flavors.get(flavor_name) or {}).get("spec") or {}
                if flavor_spec.get("nodeLabels"):
                    pod_spec.setdefault("nodeSelector", {}).update(flavor_spec["nodeLabels"])
                for toleration in flavor_spec.get("tolerations") or []:
                    if toleration not in pod_spec.setdefault("tolerations", []):
                        pod_spec["tolerations"].append(toleration)
            kueue_tas.gate(pod_spec, assignments)
            spec["suspend"] = False
            self._write("batch", "jobs", job)

    def _queues(self) -> None:
        workloads = self._items(KUEUE, "workloads")
        held = {
            (w["status"].get("admission") or {}).get("clusterQueue")
            for w in workloads
            if reserving(w)
        }
        settle(
            lambda plural: self._items(KUEUE, plural),
            lambda plural, obj: self._write(KUEUE, plural, obj),
            lambda name: name in held,
        )
        for plural, obj, status in queue_statuses(self.api.store, self._missing_flavors, workloads):
            if obj.get("status") != status:
                obj["status"] = status
                self._write(KUEUE, plural, obj, "status")
