"""The `slurm` provider: accounts, partitions, QOS, association limits and jobs on Slurm.

Mapping (docs/slurm.md has the full table of Slurm settings):
- Project -> account with its users, and what `spec.slurm` states (parent, description,
  organization, the account association's limits, users' own limits);
- ResourcePool -> existing nodes (hostlist or features); nodes are never created;
- Queue -> a partition line in the managed file (providers/slurm/partitions.py) and a QOS;
- Quota -> the project's account association (generic limits, per project) and the user
  associations on the queue's partition (`spec.slurm.users`);
- Image -> nothing on Slurm: sbatch runs it (a container) or the nodes' own runtime;
- TrainingJob and evaluations -> sbatch (providers/slurm/jobs.py); EvalSuite -> a record
  under the job root (Slurm has no such object).

Only what a spec declares is compared and written (providers/slurm/settings.py):
`observe` reads in batches (one sacctmgr snapshot, one file read, one node read) and
returns the desired document with Slurm's values put in (providers/slurm/observing.py);
a write changes exactly the settings whose values differ (providers/slurm/writes.py).
An object is changed only when it carries this manager's marker or state records that
`trainform import` adopted it; import itself writes nothing (providers/slurm/importing.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from trainform.providers.base import (
    DesiredResource,
    Discovered,
    KindSchema,
    Observation,
    ObserveRequest,
    Provider,
    ProviderContext,
    ValidationProblem,
)
from trainform.providers.errors import PermanentProviderError, ProviderConfigError
from trainform.providers.jobs import AccountedRun, JobLaunch, LogChunk, RunStatus
from trainform.providers.local.status import run_to_json
from trainform.providers.slurm import importing, mapping, observing, settings, sharing, writes
from trainform.providers.slurm.accounting import Accounting, AccountingSnapshot
from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.jobs import SlurmJobs
from trainform.providers.slurm.names import (
    check_feature,
    check_hostlist,
    check_identifier,
    marker,
)
from trainform.providers.slurm.nodes import Nodes
from trainform.providers.slurm.partitions import (
    Block,
    ManagedFile,
    PartitionFile,
    parse_settings,
    pool_record,
)
from trainform.providers.slurm.pools import PoolFacts, pool_facts
from trainform.providers.slurm.records import SuiteRecords
from trainform.providers.slurm.transactions import evidence_for


class SlurmProvider(Provider):
    type = "slurm"
    import_ids = (
        "the Slurm name the resource maps to: the account (Project), the partition "
        "(Queue, ResourcePool), the project's account (Quota)"
    )
    schemas: ClassVar[dict[str, KindSchema]] = {
        "Project": KindSchema("Project"),
        "ResourcePool": KindSchema("ResourcePool", forces_replacement=("spec.provider",)),
        "Queue": KindSchema("Queue"),
        "Quota": KindSchema("Quota", forces_replacement=("spec.queue",)),
        "EvalSuite": KindSchema("EvalSuite"),
        "TrainingJob": KindSchema("TrainingJob"),
        "Image": KindSchema("Image", forces_replacement=("spec.reference", "spec.runtime")),
    }

    def __init__(self) -> None:
        super().__init__()
        self.manager = "trainform"
        self._jobs: SlurmJobs | None = None
        self.job_root = ""
        self.data_roots: tuple[str, ...] = ()

    def configure(self, name: str, connection: Any, context: ProviderContext) -> None:
        super().configure(name, connection, context)
        self.manager = context.manager
        self.spec_root = context.spec_root
        self.data_roots = context.data_roots
        conf = getattr(connection, "conf", "") or "/etc/slurm/slurm.conf"
        self.commands = SlurmCommands(getattr(connection, "bin_dir", ""), conf)
        self.sacctmgr = Accounting(self.commands, getattr(connection, "cluster", ""))
        self.partitions = PartitionFile(
            Path(getattr(connection, "partitions_file", "/etc/slurm/trainform-partitions.conf")),
            Path(conf),
            self.commands,
        )
        self.nodes = Nodes(self.commands)
        self.job_root = getattr(connection, "job_root", "")
        self.gres = getattr(connection, "gres", "gpu") or "gpu"
        self.containers = getattr(connection, "containers", "pyxis") or "pyxis"

    @property
    def jobs(self) -> SlurmJobs:
        if self._jobs is None:
            if not self.job_root:
                raise ProviderConfigError(
                    f"cannot run jobs on slurm instance {self.name}: set connection.jobRoot to "
                    "a shared folder outside the spec folder"
                )
            self._jobs = SlurmJobs(
                self.commands,
                Path(self.job_root),
                self.spec_root.resolve(),
                self.manager,
                self.gres,
                self.data_roots,
                self.containers,
                self._qos_of,
            )
        return self._jobs

    @property
    def suites(self) -> SuiteRecords:
        if not self.job_root:
            raise ProviderConfigError(f"slurm instance {self.name}: connection.jobRoot is unset")
        return SuiteRecords(Path(self.job_root) / "suites")

    def _qos_of(self, queue: str) -> str:
        line = self.partitions.read().partition_line(queue)
        return parse_settings(line or "").get("QOS", queue).lower() or queue

    def resolve(self, resource: DesiredResource) -> dict[str, Any]:
        """An Image's pin: a host runtime is the Python the job script execs on the nodes
        (this machine's, on the shared filesystem); a container is its pinned digest."""
        if resource.kind != "Image":
            return super().resolve(resource)
        if resource.spec.get("runtime") == "host":
            from trainform.providers.local.provider import digest_of
            from trainform.providers.local.runtime import host_runtime

            facts = host_runtime()
            return {"digest": digest_of(facts), "runtime": facts}
        reference = resource.spec.get("reference") or ""
        digest = reference.partition("@")[2]
        if not digest:
            raise PermanentProviderError(
                f"cannot pin {resource.address}: without a registry instance the reference "
                "must carry its digest (`...@sha256:<digest>`)"
            )
        return {"digest": digest}

    def mark(self, address: str) -> str:
        return marker(self.manager, address)

    # jobs ------------------------------------------------------------------------------

    def submit(self, launch: JobLaunch) -> dict[str, Any]:
        return self.jobs.submit(launch)

    def cancel(self, address: str, run_id: str) -> None:
        self.jobs.cancel(address, run_id)

    def interrupt(self, address: str, run_id: str) -> str:
        """A drill's fault: cancel one step of the run's job (SlurmJobs.interrupt)."""
        return self.jobs.interrupt(address, run_id)

    def runs(self, address: str) -> list[RunStatus]:
        return self.jobs.runs(address)

    def read_log(
        self, address: str, run_id: str, attempt: int, offset: int = 0, suite: str | None = None
    ) -> LogChunk:
        return self.jobs.read_log(address, run_id, attempt, offset, suite)

    def accounting(self, since: str) -> list[AccountedRun]:
        return self.jobs.accounting(since)

    # pure ------------------------------------------------------------------------------

    def validate(self, resource: DesiredResource) -> list[ValidationProblem]:
        problems: list[ValidationProblem] = []
        spec = resource.spec

        def check(field: str, action: Any) -> None:
            try:
                action()
            except PermanentProviderError as exc:
                problems.append(ValidationProblem(resource.address, field, str(exc)))

        if resource.kind in ("Project", "Queue"):
            check("metadata.name", lambda: check_identifier(resource.name, "name"))
        if resource.kind == "Project":
            lowered = [u.lower() for u in spec.get("users", [])]
            for user in spec.get("users", []):
                check("spec.users", lambda user=user: check_identifier(user, "user"))
            if len(set(lowered)) != len(lowered):
                problems.append(
                    ValidationProblem(
                        resource.address, "spec.users", "user names collide once lowercased"
                    )
                )
        if resource.kind == "ResourcePool":
            if not spec.get("nodeList") and not spec.get("features"):
                problems.append(
                    ValidationProblem(
                        resource.address,
                        "spec.nodeList",
                        "a Slurm pool names its nodes: give nodeList or features",
                    )
                )
            if spec.get("nodeList"):
                check("spec.nodeList", lambda: check_hostlist(spec["nodeList"]))
            for feature in spec.get("features", []):
                check("spec.features", lambda feature=feature: check_feature(feature))
        if resource.kind == "Queue":
            if spec["defaultPriority"] < 0:
                problems.append(
                    ValidationProblem(
                        resource.address,
                        "spec.defaultPriority",
                        "Slurm QOS priorities are not negative",
                    )
                )
            check("spec.pools", lambda: settings.queue_qos(spec, False, ""))
            problems += sharing.queue_problems(resource)
        if resource.kind == "Quota":
            check("spec.limits", lambda: settings.quota_account_limits(spec["limits"]))
            check("spec.queue", lambda: check_identifier(spec["queue"], "queue"))
        if resource.kind == "TrainingJob":
            prefix = (spec.get("checkpoint") or {}).get("prefix", "")
            if prefix.startswith("s3://"):
                problems.append(
                    ValidationProblem(
                        resource.address,
                        "spec.checkpoint.prefix",
                        "the slurm provider keeps checkpoints under its jobRoot, not on S3",
                    )
                )
        return problems

    def validate_all(self, resources: list[DesiredResource]) -> list[ValidationProblem]:
        return sharing.cross_problems(resources)

    def delete_impact(self, address: str, kind: str, outputs: dict[str, Any]) -> list[str]:
        return sharing.delete_impact(self, address, kind, outputs)

    def render(self, resource: DesiredResource) -> list[dict[str, Any]]:
        """What a resource becomes in Slurm: only the settings its spec declares."""
        spec = resource.spec
        if resource.kind == "Project":
            rendered: dict[str, Any] = {
                "account": resource.name,
                "users": sorted(spec.get("users", [])),
            }
            if spec.get("slurm"):
                rendered["slurm"] = spec["slurm"]
            return [rendered]
        if resource.kind == "ResourcePool":
            return [{"record": pool_record(spec)}]
        if resource.kind == "Queue":
            nodes, _ = mapping.queue_nodes(self.name, resource, strict=False)
            partition = {"Nodes": nodes, **settings.queue_partition(spec, False, resource.name)}
            return [
                {
                    "partition": resource.name,
                    "settings": partition,
                    "file": str(self.partitions.path),
                },
                {
                    "qos": settings.qos_name(resource.name, spec),
                    "settings": settings.queue_qos(spec, False, self.mark(resource.address)),
                    **(
                        {"declaredBy": f"Queue/{settings.qos_from(spec)}"}
                        if settings.qos_from(spec)
                        else {}
                    ),
                },
            ]
        if resource.kind == "Quota":
            users = (spec.get("slurm") or {}).get("users")
            return [
                {
                    "association": {"account": resource.project},
                    "limits": settings.quota_account_limits(spec["limits"]),
                },
                {
                    "associations": {
                        "account": resource.project,
                        "partition": spec["queue"],
                        "users": users if users is not None else "every user of the account",
                    }
                },
            ]
        return []

    # reads -----------------------------------------------------------------------------

    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        kinds = {r.kind for r in requests}
        snapshot = (
            self.sacctmgr.snapshot()
            if kinds & {"Project", "Queue", "Quota"}
            else AccountingSnapshot()
        )
        managed = self.partitions.read() if kinds & {"ResourcePool", "Queue", "Quota"} else None
        known = self.nodes.all() if "ResourcePool" in kinds else {}
        seen = {}
        job_runs = self.jobs.runs_of([r.address for r in requests if r.kind == "TrainingJob"])
        for request in requests:
            if request.kind == "TrainingJob":
                runs = job_runs[request.address]
                seen[request.address] = (
                    Observation(exists=True, status={"runs": [run_to_json(r) for r in runs]})
                    if runs
                    else Observation(exists=False)
                )
            elif request.kind == "Image":  # nothing on Slurm: what state recorded is it
                seen[request.address] = (
                    Observation(exists=True, live=request.document, outputs=request.outputs)
                    if request.outputs
                    else Observation(exists=False)
                )
            elif request.kind == "EvalSuite":
                document = self.suites.read(request.address, self.manager)
                seen[request.address] = (
                    Observation(exists=True, live=document)
                    if document is not None
                    else Observation(exists=False)
                )
            elif request.kind == "Project":
                seen[request.address] = observing.observe_project(self, request, snapshot)
            elif request.kind == "ResourcePool":
                seen[request.address] = self._observe_pool(request, managed or ManagedFile(), known)
            elif request.kind == "Queue":
                seen[request.address] = observing.observe_queue(self, request, snapshot, managed)
            elif request.kind == "Quota":
                seen[request.address] = observing.observe_quota(self, request, snapshot, managed)
            else:
                seen[request.address] = Observation(exists=False)
        return self._with_evidence(seen)

    def _with_evidence(self, seen: dict[str, Observation]) -> dict[str, Observation]:
        """Each accounting object's last change (who, when, what) as the evidence drift
        shows on a modified finding: one read of slurmdbd's transactions for all."""
        if not any(o.exists and o.places for o in seen.values()):
            return seen
        changes = self.sacctmgr.last_changes()
        return {
            address: replace(o, evidence=evidence_for(o.places, changes)) if o.places else o
            for address, o in seen.items()
        }

    def _observe_pool(
        self, request: ObserveRequest, managed: ManagedFile, known: dict[str, Any]
    ) -> Observation:
        block = managed.find(request.address)
        if block is None and request.outputs.get("adopted"):
            facts = pool_facts(self.nodes, request.document["spec"], known)
            if not facts.nodes:
                return Observation(exists=False)
            live = mapping.live_pool(request.document, facts.as_dict())
            outputs = {**facts.outputs(self.nodes), "adopted": True}
            return Observation(exists=True, live=live, outputs=outputs, findings=facts.findings())
        if block is None:  # not created yet: say now if the nodes it names do not exist
            planned = pool_facts(self.nodes, request.document["spec"], known)
            missing = tuple(f for f in planned.findings() if f.kind == "nodes-missing")
            return Observation(exists=False, findings=missing)
        if block.manager != self.manager or not block.is_pool:
            return Observation(exists=False)
        settings = block.settings
        document = json.loads(json.dumps(request.document))
        document["spec"]["nodeList"] = settings.get("Nodes", "")
        document["spec"]["features"] = [f for f in settings.get("Features", "").split(",") if f]
        facts = pool_facts(self.nodes, document["spec"], known)
        live = mapping.live_pool(document, facts.as_dict())
        return Observation(
            exists=True, live=live, outputs=facts.outputs(self.nodes), findings=facts.findings()
        )

    # writes ----------------------------------------------------------------------------

    def create(self, resource: DesiredResource) -> dict[str, Any]:
        return self._put(resource, {})

    def update(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        return self._put(resource, outputs)

    def _put(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        self.require_valid(resource)
        return writes.put(self, resource, outputs)

    def recreate(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        """Written back with what state recorded: an adopted object stays adopted (a
        hand-deleted adopted partition line comes back, its site QOS is not refused)."""
        return self._put(resource, outputs)

    def delete(self, address: str, kind: str, outputs: dict[str, Any]) -> None:
        writes.remove(self, address, kind, outputs)

    def list_owned(self) -> list[tuple[str, str]]:
        return importing.owned(self)

    def discover(self) -> list[Discovered]:
        return importing.discover(self)

    def adopt(self, request: ObserveRequest, identifier: str) -> Observation:
        return importing.adopt(self, request, identifier)


__all__ = ["SlurmProvider", "Block", "PoolFacts"]
