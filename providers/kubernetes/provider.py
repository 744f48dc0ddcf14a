"""The `kubernetes` provider: Projects, pools, queues and quotas as Kueue objects, training
runs as Jobs (runs.py). See docs/kubernetes.md for the mapping.

Reads are batched: `observe` sends one cluster-wide list per Kubernetes kind involved,
filtered by this instance's manager label (namespaced kinds too: one list across
namespaces, not one per namespace), however many resources are asked. Writes are
server-side applies with the connection's field manager, each of the complete set of
fields trainform manages on the object (never a merge patch: docs/kubernetes.md, "One
write per object and field"); an object that exists without this instance's mark
(manager and address) is never changed. Deleting a Quota first applies its ClusterQueue
with stopPolicy HoldAndDrain, so Kueue evicts what it admitted before the queue goes; the
engine deletes Queues before the pools (ResourceFlavors) they use.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from trainform.providers.base import (
    DesiredResource,
    Discovered,
    Finding,
    KindSchema,
    Observation,
    ObserveRequest,
    Provider,
    ProviderContext,
    ValidationProblem,
)
from trainform.providers.errors import PermanentProviderError
from trainform.providers.kubernetes import manifests
from trainform.providers.kubernetes.applied import applied_configuration
from trainform.providers.kubernetes.client import KubeClient, describe, make_api_client
from trainform.providers.kubernetes.cohort_cycles import cohort_cycle_problems
from trainform.providers.kubernetes.connection import connection_settings
from trainform.providers.kubernetes.delete_order import SKELETON, delete_order
from trainform.providers.kubernetes.dependency_outputs import gpu_names, queue_facts_of
from trainform.providers.kubernetes.discovery import discover_documents
from trainform.providers.kubernetes.evidence import last_change
from trainform.providers.kubernetes.impact import admitted_usage, quota_impact
from trainform.providers.kubernetes.kinds import (
    BY_KIND,
    CLUSTER_QUEUE,
    NAMESPACE,
    OBJECTS_OF,
    RESOURCE_FLAVOR,
    WORKLOAD,
    ApiKind,
)
from trainform.providers.kubernetes.kueue_config import (
    KueueConfig,
    config_warnings,
    read_kueue_config,
)
from trainform.providers.kubernetes.kueue_rules import instance_problems, resource_problems
from trainform.providers.kubernetes.leftovers import (
    dropped_steps,
    left_over,
    left_over_finding,
    prune_flavors,
)
from trainform.providers.kubernetes.name_clashes import name_clash_problems
from trainform.providers.kubernetes.naming import KIND_LABEL, Naming, address_of
from trainform.providers.kubernetes.pool_cycle import planned_steps, reattach, retire
from trainform.providers.kubernetes.priority_classes import (
    delete_unused_shared_classes,
    describe_unused,
    unused_shared_classes,
)
from trainform.providers.kubernetes.project_queues import QUEUE_LABEL
from trainform.providers.kubernetes.projection import project_document, roles
from trainform.providers.kubernetes.queue_sync import with_live_queue_facts, write_queue_policy
from trainform.providers.kubernetes.runs import KubernetesJobs
from trainform.providers.kubernetes.terminating import (
    WAIT_SECONDS,
    finding,
    is_terminating,
    listing,
    wait_gone,
)

RESOURCE_KINDS = ("Project", "ResourcePool", "Queue", "Quota")
FORCE_ANNOTATION = "trainform.dev/force-conflicts"  # on a spec: take its fields back
Key = tuple[str, str, str]  # (kind, namespace, name)
WORKLOAD_PAGE = 500


def _key(obj: dict[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return (str(obj.get("kind")), metadata.get("namespace") or "", metadata.get("name", ""))


class KubernetesProvider(KubernetesJobs, Provider):
    type = "kubernetes"
    import_ids = (
        "<Kind>/[<namespace>/]<name> of the primary object: "
        "Namespace/<namespacePrefix><project> (Project), ResourceFlavor/<namePrefix><pool> "
        "(ResourcePool), Cohort/<namePrefix><queue> (Queue), "
        "ClusterQueue/<namePrefix><queue>-<project> (Quota)"
    )
    schemas: ClassVar[dict[str, KindSchema]] = {
        "Project": KindSchema("Project", ignored=("spec.users", "spec.specPaths")),
        "ResourcePool": KindSchema(
            "ResourcePool",
            # a ResourceFlavor's topologyName and a Topology's levels are immutable (CEL)
            forces_replacement=("spec.topology",),
            ignored=("spec.provider", "spec.nodeList", "spec.features"),
        ),
        "Queue": KindSchema("Queue"),
        "Quota": KindSchema("Quota", forces_replacement=("spec.queue",)),  # immutable LocalQueue
        "TrainingJob": KindSchema("TrainingJob"),
        "EvalSuite": KindSchema("EvalSuite"),
    }

    def __init__(self, client: KubeClient | None = None) -> None:
        super().__init__()
        self._client = client
        self.connection: Any = None
        self.context: ProviderContext | None = None
        self.naming = Naming()
        self.field_manager = "trainform"
        self.force = False
        self._kueue_config: KueueConfig | None = None
        self.wait_seconds = WAIT_SECONDS  # for a Terminating object to go

    def configure(self, name: str, connection: Any, context: ProviderContext) -> None:
        super().configure(name, connection, context)
        self.connection = connection
        self.context = context
        setting = connection_settings(connection)
        self.naming = Naming(
            context.manager, setting("namespace_prefix", ""), setting("name_prefix", "")
        )
        self.field_manager = setting("field_manager", "") or context.manager
        self.force = bool(setting("force_conflicts", False))

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            setting = connection_settings(self.connection)
            root = self.context.spec_root if self.context else None
            self._client = KubeClient(
                make_api_client(setting("kubeconfig", ""), setting("context", ""), root)
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._kueue_config = None

    # pure ------------------------------------------------------------------------------

    def validate(self, resource: DesiredResource) -> list[ValidationProblem]:
        return resource_problems(resource, self.naming)

    def validate_all(self, resources: list[DesiredResource]) -> list[ValidationProblem]:
        found = instance_problems(resources) + cohort_cycle_problems(resources)
        return found + name_clash_problems(resources, self.naming)

    def read_settings(self) -> None:
        location = connection_settings(self.connection)("kueue_config", "")
        self._kueue_config = read_kueue_config(self.client, location)

    def plan_warnings(self, resource: DesiredResource) -> list[str]:
        return config_warnings(resource, self._kueue_config)

    def render(self, resource: DesiredResource) -> list[dict[str, Any]]:
        naming, address, name, document = (
            self.naming,
            resource.address,
            resource.name,
            resource.document,
        )
        if resource.kind == "Project":
            return manifests.render_project(naming, address, name, document)
        if resource.kind == "ResourcePool":
            return manifests.render_pool(naming, address, name, document)
        if resource.kind == "Queue":
            return manifests.render_queue(
                naming, address, name, document, gpu_names(resource, self.name)
            )
        if resource.kind == "Quota":
            return manifests.render_quota(
                naming,
                address,
                name,
                resource.project or "",
                document,
                queue_facts_of(resource, self.name),
            )
        if resource.kind == "TrainingJob":
            return [self.preview_job(resource)]
        return []

    def _outputs(
        self,
        resource: DesiredResource,
        rendered: list[dict[str, Any]],
        live: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Names of the objects written, and the accelerator resource name that queues and
        quotas of this pool or queue use."""
        outputs: dict[str, Any] = {
            "objects": [
                {"kind": obj["kind"], "name": obj["metadata"]["name"]}
                | (
                    {"namespace": obj["metadata"]["namespace"]}
                    if "namespace" in obj["metadata"]
                    else {}
                )
                for obj in rendered
            ]
        }
        if resource.kind == "ResourcePool" and resource.spec.get("accelerator"):
            outputs["resourceName"] = resource.spec["accelerator"].get(
                "resourceName", manifests.DEFAULT_GPU
            )
        if resource.kind == "Queue":
            names = gpu_names(resource, self.name) or dict(
                resource.outputs_of_dependencies.get("", {}).get("resourceNames") or {}
            )
            outputs.update(manifests.queue_facts(self.naming, resource.spec, names))
        return outputs

    # reads -----------------------------------------------------------------------------

    def _listed(self, apis: set[ApiKind]) -> dict[Key, dict[str, Any]]:
        found: dict[Key, dict[str, Any]] = {}
        for api in sorted(apis, key=lambda a: a.kind):
            for obj in self.client.list(api, self.naming.selector):
                found[_key(obj)] = obj
        return found

    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        jobs = [r for r in requests if r.kind == "TrainingJob"]
        observations = self.observe_jobs(jobs) if jobs else {}
        for request in requests:
            if request.kind == "EvalSuite":
                observations[request.address] = Observation(exists=True, live=request.document)
        wanted = [r for r in requests if r.kind in RESOURCE_KINDS]
        if not wanted:
            return observations
        apis = {api for r in wanted for api in OBJECTS_OF[r.kind]}
        usage = None
        if any(r.kind == "Queue" for r in wanted):
            apis.add(CLUSTER_QUEUE)  # the policy and workloads of its projects' queues
            usage = admitted_usage(self._workloads())
        if any(r.kind in ("ResourcePool", "Quota") for r in wanted):
            apis |= {CLUSTER_QUEUE, RESOURCE_FLAVOR}  # who lists a flavor; left-over flavors
        listed = self._listed(apis)
        self._read_adopted(wanted, listed)
        for request in wanted:
            observations[request.address] = self._observe_one(request, listed, usage)
        return observations

    def _read_adopted(self, requests: list[ObserveRequest], listed: dict[Key, Any]) -> None:
        """Objects imported without trainform's marks (import writes nothing) are not in
        the labelled lists: read each by name until an apply marks it."""
        for request in requests:
            for entry in request.outputs.get(ADOPTED) or []:
                key = (entry["kind"], entry.get("namespace", ""), entry["name"])
                if key in listed:
                    continue
                live = self.client.get(BY_KIND[entry["kind"]], entry["name"], key[1] or None)
                if live is not None:
                    listed[key] = live

    def _workloads(self) -> list[dict[str, Any]]:
        """Kueue Workloads in this instance's project namespaces only, paged."""
        namespaces = [
            obj["metadata"]["name"]
            for obj in self.client.list(NAMESPACE, self.naming.selector)
            if self._mine(obj)
        ]
        return [
            workload
            for namespace in sorted(namespaces)
            for workload in self.client.list(WORKLOAD, "", namespace, page=WORKLOAD_PAGE)
        ]

    def _observe_one(
        self,
        request: ObserveRequest,
        listed: dict[Key, dict[str, Any]],
        usage: dict[str, list[dict[str, Any]]] | None,
    ) -> Observation:
        resource = _as_resource(request)
        if request.kind == "Queue":  # the accelerator names its last apply recorded
            resource = DesiredResource(
                request.address,
                request.kind,
                request.name,
                request.project,
                request.document,
                {"": {"resourceNames": request.outputs.get("resourceNames") or {}}},
            )
        rendered = self.render(resource)
        objects: dict[str, dict[str, Any] | None] = {}
        findings: list[Finding] = []
        for role, obj in zip(roles(rendered), rendered, strict=True):
            live = listed.get(_key(obj))
            if live is not None and address_of(live) != request.address:
                if not _adopted(live, request.outputs):
                    live = None  # ours, but another address's: not this resource
            objects[role] = live
            if is_terminating(live):
                queues, flavors = (
                    _of_kind(listed, "ClusterQueue"),
                    _of_kind(listed, "ResourceFlavor"),
                )
                findings.append(finding(live, queues, flavors))
            not_written = _reference(obj) in (request.outputs.get(NOT_WRITTEN) or [])
            if live is None and obj is not rendered[0] and not not_written:
                findings.append(
                    Finding(
                        "object-missing",
                        f"{describe(obj)} is gone; apply recreates it",
                        {"object": describe(obj)},
                    )
                )
        written = [o for o in listed.values() if address_of(o) == request.address and self._mine(o)]
        recorded = [{"kind": o["kind"], "metadata": o} for o in request.outputs.get("objects", [])]
        for obj in left_over(self.naming, request.address, [*rendered, *recorded], written):
            findings.append(left_over_finding(obj, request.address))
        project_queues = []
        if request.kind == "Queue":
            cohort = rendered[0]["metadata"]["name"]
            project_queues = [
                obj
                for key, obj in sorted(listed.items())
                if key[0] == "ClusterQueue" and _labels(obj).get(QUEUE_LABEL) == cohort
            ]
            objects["ClusterQueue"] = project_queues[0] if project_queues else None
        document = project_document(request.kind, request.document, objects, self.naming)
        if document is None:
            return Observation(exists=False)
        status: dict[str, Any] = {}
        if request.kind == "Quota":  # its flavors, for the plan's steps
            status["written"] = [_reference(o) for o in written]
        if request.kind == "ResourcePool":
            flavor = rendered[0]["metadata"]["name"]
            status["listedBy"] = listing(_of_kind(listed, "ClusterQueue"), flavor)
        if request.kind == "Queue" and usage is not None:
            names = [q["metadata"]["name"] for q in project_queues]
            status["admittedWorkloads"] = [w for name in names for w in usage.get(name, [])]
            status["flavorsUsage"] = [
                flavor
                for queue in project_queues
                for flavor in (queue.get("status") or {}).get("flavorsUsage", [])
            ]
        return Observation(
            exists=True,
            live=document,
            outputs=self._outputs(resource, rendered, objects.get(rendered[0]["kind"])),
            status=status,
            findings=tuple(findings),
            evidence=last_change(
                [obj for obj in [*objects.values(), *project_queues] if obj], self.field_manager
            ),
        )

    def change_impact(self, resource: DesiredResource, observation: Observation) -> list[str]:
        if resource.kind != "Queue":
            return []
        return quota_impact(
            resource.spec, observation.status.get("admittedWorkloads", []), self.naming
        )

    def change_steps(
        self, resource: DesiredResource, action: str, observation: Observation | None
    ) -> list[str]:
        if resource.kind == "Quota" and observation is not None:
            return dropped_steps(resource.address, observation, self.render(resource))
        if resource.kind != "ResourcePool":
            return []
        return planned_steps(self.render(resource), action, observation)

    def list_owned(self) -> list[tuple[str, str]]:
        apis = {api for kinds in OBJECTS_OF.values() for api in kinds}
        owned = set()
        for obj in self._listed(apis | self.job_kinds()).values():
            address = address_of(obj)
            kind = ((obj.get("metadata") or {}).get("labels") or {}).get(KIND_LABEL)
            if address and kind and self.naming.owns(obj, address) and self._mine(obj):
                owned.add((address, kind))
        return sorted(owned)

    def _mine(self, obj: dict[str, Any]) -> bool:
        """Named as this instance names things (its prefixes), so two instances sharing a
        cluster and a manager name never count each other's objects."""
        metadata = obj.get("metadata") or {}
        if metadata.get("namespace"):
            return self.naming.project_of(metadata["namespace"]) is not None
        if obj.get("kind") == "Namespace":
            return self.naming.project_of(metadata.get("name", "")) is not None
        return self.naming.spec_name(metadata.get("name", "")) is not None

    def discover(self) -> list[Discovered]:
        return discover_documents(self.client, self.naming, self.name)

    def adopt(self, request: ObserveRequest, identifier: str) -> Observation:
        kind, _, rest = identifier.partition("/")
        namespace, _, name = rest.rpartition("/")
        api = BY_KIND.get(kind)
        if api is None:
            raise PermanentProviderError(
                f"cannot import {identifier}: name it as <Kind>/[<namespace>/]<name>"
            )
        live = self.client.get(api, name, namespace or None)
        if live is None:
            return Observation(exists=False)
        owner = address_of(live)
        if owner and owner != request.address and self.naming.owns(live):
            raise PermanentProviderError(
                f"cannot import {identifier} as {request.address}: trainform manages it as {owner}"
            )
        resource = _as_resource(request)
        if resource.kind == "Quota" and not queue_facts_of(resource, self.name):
            resource = with_live_queue_facts(self.client, self.naming, resource)
        found: dict[Key, dict[str, Any]] = {}
        absent = []
        for obj in self.render(resource):
            current = self._check_owner(obj, request.address, adopting=True)
            if current is not None:
                found[_key(current)] = current
            else:
                absent.append(_reference(obj))
        adopted = [_reference(obj) for obj in found.values() if address_of(obj) is None]
        marks = {ADOPTED: adopted, NOT_WRITTEN: absent} if adopted else {}
        marked = ObserveRequest(
            request.address, request.kind, request.name, request.project, request.document, marks
        )
        observation = self._observe_one(marked, found, None)
        if not observation.exists or not adopted:
            return observation
        return replace(observation, outputs={**observation.outputs, **marks})

    # writes ----------------------------------------------------------------------------

    def create(self, resource: DesiredResource) -> dict[str, Any]:
        return self._write(resource)

    def update(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        # An imported object gets trainform's marks (and its fields) with its first update.
        return self._write(resource, adopting=bool(outputs.get(ADOPTED)))

    def _write(self, resource: DesiredResource, adopting: bool = False) -> dict[str, Any]:
        self.require_valid(resource)
        if resource.kind in ("TrainingJob", "EvalSuite"):
            return {}  # runs go through submit(); suites are read at submission
        if resource.kind == "Quota" and not queue_facts_of(resource, self.name):
            resource = with_live_queue_facts(self.client, self.naming, resource)
        rendered = self.render(resource)
        annotations = resource.document.get("metadata", {}).get("annotations") or {}
        forced = annotations.get(FORCE_ANNOTATION) == "true"
        lives = [self._check_owner(obj, resource.address, adopting) for obj in rendered]
        going = [live for live in lives if is_terminating(live)]
        if going and resource.kind == "ResourcePool":  # pool_cycle.py: steps 1 and 2
            present = [live for live in lives if live is not None]
            retire(self.client, self.naming, self.field_manager, present, self.wait_seconds)
        elif going:
            wait_gone(self.client, going, self.wait_seconds)
        for obj in rendered:
            # importing takes the fields over from whoever set them
            self.client.apply(obj, self.field_manager, self.force or adopting or forced)
        if resource.kind == "ResourcePool":  # step 4
            flavor = rendered[0]["metadata"]["name"]
            reattach(self.client, self.naming, self.field_manager, flavor)
        outputs = self._outputs(resource, rendered)
        if resource.kind == "Queue":
            write_queue_policy(
                self.client,
                self.naming,
                self.field_manager,
                resource,
                outputs,
                self.force or forced,
            )
        if resource.kind == "Quota":  # its ClusterQueue no longer lists them: delete
            prune_flavors(self.client, self.naming, resource.address, rendered, self.wait_seconds)
        return outputs

    def _check_owner(
        self, obj: dict[str, Any], address: str, adopting: bool
    ) -> dict[str, Any] | None:
        """The live object, when it is missing or this address's (or free to adopt)."""
        api = BY_KIND[obj["kind"]]
        metadata = obj["metadata"]
        live = self.client.get(api, metadata["name"], metadata.get("namespace"))
        if live is None or self.naming.owns(live, address):
            return live
        if adopting and not address_of(live):
            return live
        labels = (live.get("metadata") or {}).get("labels") or {}
        raise PermanentProviderError(
            f"cannot apply {describe(obj)}: it exists and is not this trainform's "
            f"(manager {labels.get('trainform.dev/manager', 'none')!r}, address "
            f"{address_of(live) or 'none'}); trainform never changes objects it does not own "
            "(adopt it with `trainform import`)"
        )

    def delete(self, address: str, kind: str, outputs: dict[str, Any]) -> None:
        if kind == "TrainingJob":
            self.cancel(address, None)
            delete_unused_shared_classes(self.client, self.naming)
            return
        if kind not in OBJECTS_OF:
            return
        found = []
        for obj in self._objects_of(address, kind, outputs):
            metadata = obj["metadata"]
            api = BY_KIND[obj["kind"]]
            live = self.client.get(api, metadata["name"], metadata.get("namespace"))
            if live is None:
                continue
            if not self.naming.owns(live, address) and not _adopted(live, outputs):
                raise PermanentProviderError(
                    f"cannot delete {describe(obj)}: it is not this trainform's "
                    f"(address {address_of(live) or 'none'}); trainform deletes only its own"
                )
            found.append((api, live))
        if kind == "ResourcePool":  # pool_cycle.py: detach, delete, wait until gone
            lives = [live for _, live in found]
            retire(self.client, self.naming, self.field_manager, lives, self.wait_seconds)
            return
        for api, live in delete_order(found):
            if api is CLUSTER_QUEUE:  # drain first: Kueue evicts what it admitted
                drained = applied_configuration(live, self.field_manager)
                drained["spec"] = {**(drained.get("spec") or {}), "stopPolicy": "HoldAndDrain"}
                self.client.apply(drained, self.field_manager, force=True)
            metadata = live["metadata"]
            self.client.delete(api, metadata["name"], metadata.get("namespace"))
        if kind == "Queue":
            delete_unused_shared_classes(self.client, self.naming)

    def delete_impact(self, address: str, kind: str, outputs: dict[str, Any]) -> list[str]:
        """The shared priority classes a TrainingJob's or Queue's delete also removes:
        those no Job of this instance names once it is done (priority_classes.py)."""
        if kind not in ("TrainingJob", "Queue"):
            return []
        leaving = address if kind == "TrainingJob" else None
        return describe_unused(unused_shared_classes(self.client, self.naming, leaving))

    def _objects_of(self, address: str, kind: str, outputs: dict[str, Any]) -> list[dict]:
        """The objects an address wrote: from its outputs, else as named by its address
        (every object but a Quota's LocalQueue is named after the resource)."""
        if outputs.get("objects"):
            return [
                {"kind": o["kind"], "metadata": {k: v for k, v in o.items() if k != "kind"}}
                for o in outputs["objects"]
            ]
        parts = address.split("/")
        skeleton = DesiredResource(
            address, kind, parts[-1], parts[1] if len(parts) == 3 else None, SKELETON[kind]
        )
        return [o for o in self.render(skeleton) if o["kind"] != "LocalQueue"]


ADOPTED = "adopted"
"""Outputs key: the objects an import took over without writing to them (no marks yet)."""
NOT_WRITTEN = "notYetWritten"
"""Outputs key: objects a resource renders that an import did not find (a hand-made Queue
without a WorkloadPriorityClass): created by the resource's first update, not missing."""


def _reference(obj: dict[str, Any]) -> dict[str, str]:
    metadata = obj["metadata"]
    reference = {"kind": obj["kind"], "name": metadata["name"]}
    if metadata.get("namespace"):
        reference["namespace"] = metadata["namespace"]
    return reference


def _adopted(live: dict[str, Any], outputs: dict[str, Any]) -> bool:
    """`live` is unmarked and one of the objects an import recorded in `outputs`."""
    return address_of(live) is None and _reference(live) in (outputs.get(ADOPTED) or [])


def _as_resource(request: ObserveRequest) -> DesiredResource:
    return DesiredResource(
        request.address, request.kind, request.name, request.project, request.document
    )


def _of_kind(listed: dict[Key, dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for key, obj in sorted(listed.items()) if key[0] == kind]


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})
