"""The `local` provider: a whole training platform on this machine, with no servers.

Platform objects (projects, pools, queues, quotas, images, evaluation suites, datasets)
live in a SQLite database under the local root (default `.trainform/` in the spec
folder). Pools are this machine: declared capacity is checked against its CPUs, memory
and GPUs. Datasets are folders; each version's manifest (files, sizes, sha256) is
recorded, and any change under a recorded or pinned version is reported as data mutated.

Training jobs run as processes on this machine (JobProvider; providers/local/jobs.py):
the engine submits attempts, admission starts them within queue and quota capacity, a
supervisor per attempt records its outcome, and `observe` of a TrainingJob reports its
runs. Creating or updating a TrainingJob resource runs nothing by itself.

`trainform import ADDRESS ID` (`adopt`) only reads, through a read-only connection: state
records the row stored as ID (`adopted`, `adoptedCreatedAt` in outputs), `observe` reads it
there, whoever manages it, and the first planned write moves it to ADDRESS under this
manager in one transaction (a delete before then deletes that row). An adopted row of this
manager under another address is no orphan (`adopted_identifiers`). A row at a resource's
address that another manager holds is observed as absent with a `managed-by-other` finding.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

from trainform.providers.base import (
    MANAGED_BY_OTHER,
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
from trainform.providers.errors import PermanentProviderError, ProviderConfigError
from trainform.providers.jobs import AccountedRun, JobLaunch, LogChunk, RunStatus
from trainform.providers.local.database import (
    Adopted,
    ObjectRow,
    PlatformDatabase,
    read_rows,
)
from trainform.providers.local.datasets import (
    Manifest,
    build_manifest,
    manifest_from_json,
    manifest_to_json,
    resolve_source,
    version_folder,
)
from trainform.providers.local.group import env_problems
from trainform.providers.local.jobs import LocalJobs
from trainform.providers.local.machine import MachineFacts, read_machine_facts
from trainform.providers.local.runs import RunStore
from trainform.providers.local.runtime import host_runtime
from trainform.providers.local.status import run_to_json
from trainform.specs.quantity import binary_size

DATABASE_FILE = "platform.db"


class LocalProvider(Provider):
    type = "local"
    import_ids = (
        "the address the object has in the local platform database "
        "(`trainform state list` of the folder that made it)"
    )
    schemas: ClassVar[dict[str, KindSchema]] = {
        "Project": KindSchema("Project"),
        "ResourcePool": KindSchema("ResourcePool", forces_replacement=("spec.provider",)),
        "Queue": KindSchema("Queue"),
        "Quota": KindSchema("Quota", forces_replacement=("spec.queue",)),
        "Dataset": KindSchema(
            "Dataset",
            forces_replacement=("spec.source", "spec.format"),
            computed=("versions",),
            data_bearing=True,
        ),
        "Image": KindSchema("Image", forces_replacement=("spec.reference", "spec.runtime")),
        "EvalSuite": KindSchema("EvalSuite"),
        "TrainingJob": KindSchema("TrainingJob"),
    }

    def __init__(self, facts: MachineFacts | None = None) -> None:
        super().__init__()
        self._facts = facts
        self._database: PlatformDatabase | None = None
        self._jobs: LocalJobs | None = None
        self.root = Path(".trainform")
        self.spec_root = Path(".")
        self.manager = "trainform"
        self.object_store: dict[str, Any] | None = None
        self.data_roots: tuple[str, ...] = ()

    def configure(self, name: str, connection: Any, context: ProviderContext) -> None:
        super().configure(name, connection, context)
        root = Path(getattr(connection, "root", ".trainform"))
        self.root = root if root.is_absolute() else context.spec_root / root
        self.spec_root = context.spec_root
        self.manager = context.manager
        self.object_store = context.object_store
        self.data_roots = context.data_roots
        if self._facts is None:
            self._facts = read_machine_facts()

    @property
    def facts(self) -> MachineFacts:
        if self._facts is None:
            self._facts = read_machine_facts()
        return self._facts

    @property
    def database(self) -> PlatformDatabase:
        if self._database is None:
            try:
                self._database = PlatformDatabase(self.root / DATABASE_FILE)
            except OSError as exc:
                raise ProviderConfigError(
                    f"cannot open the local platform database under {self.root}: {exc}"
                ) from None
        return self._database

    @property
    def jobs(self) -> LocalJobs:
        if self._jobs is None:
            try:
                store = RunStore(self.root / DATABASE_FILE)
            except OSError as exc:
                raise ProviderConfigError(
                    f"cannot open the local platform database under {self.root}: {exc}"
                ) from None
            self._jobs = LocalJobs(
                store,
                self.root.resolve(),
                self.spec_root.resolve(),
                self.manager,
                self.object_store,
                self.data_roots,
            )
        return self._jobs

    def close(self) -> None:
        if self._database is not None:
            self._database.close()
            self._database = None
        if self._jobs is not None:
            self._jobs.store.close()
            self._jobs = None

    # jobs (JobProvider) --------------------------------------------------------------

    def submit(self, launch: JobLaunch) -> dict[str, Any]:
        return self.jobs.submit(launch)

    def cancel(self, address: str, run_id: str) -> None:
        self.jobs.cancel(address, run_id)

    def runs(self, address: str) -> list[RunStatus]:
        return self.jobs.runs(address)

    def read_log(
        self, address: str, run_id: str, attempt: int, offset: int = 0, suite: str | None = None
    ) -> LogChunk:
        return self.jobs.read_log(address, run_id, attempt, offset, suite)

    def accounting(self, since: str) -> list[AccountedRun]:
        return self.jobs.accounting(since)

    def tick(self) -> list[str]:
        """One scheduler step: start queued attempts that fit; ids of those started."""
        return self.jobs.tick()

    def interrupt(self, address: str, run_id: str) -> str:
        """A drill's fault: kill the run's training process (LocalJobs.interrupt)."""
        return self.jobs.interrupt(address, run_id)

    # pure ----------------------------------------------------------------------------

    def validate(self, resource: DesiredResource) -> list[ValidationProblem]:
        spec = resource.spec
        problems = []

        def problem(field: str, message: str) -> None:
            problems.append(ValidationProblem(resource.address, field, message))

        if resource.kind == "ResourcePool":
            facts = self.facts
            if spec["nodes"] != 1:
                problem("spec.nodes", "the local provider has exactly one node: this machine")
            if Decimal(spec["cpu"]) > facts.cpu:
                problem("spec.cpu", f"declares {spec['cpu']} CPUs; this machine has {facts.cpus}")
            if Decimal(spec["memory"]) > facts.memory_bytes:
                problem(
                    "spec.memory",
                    f"declares {binary_size(Decimal(spec['memory']))} of memory; this machine "
                    f"has {binary_size(facts.memory_bytes)}",
                )
            accelerator = spec.get("accelerator")
            if accelerator and accelerator["count"] > len(facts.gpus):
                problem(
                    "spec.accelerator.count",
                    f"declares {accelerator['count']} accelerators; this machine has "
                    f"{len(facts.gpus)}",
                )
        if resource.kind == "TrainingJob":
            for field, message in env_problems(spec):
                problem(field, message)
            # N nodes are N launchers on this machine: their accelerators add up here.
            resources = spec["resources"]
            gpus = len(self.facts.gpus)
            wanted = resources["acceleratorsPerNode"] * resources["nodes"]
            if wanted > gpus:
                asked = f"asks for {resources['acceleratorsPerNode']} accelerators"
                if resources["nodes"] > 1:
                    asked = (
                        f"asks for {wanted} accelerators ({resources['acceleratorsPerNode']} on "
                        f"each of {resources['nodes']} nodes, all on this machine)"
                    )
                problem("spec.resources.acceleratorsPerNode", f"{asked}; this machine has {gpus}")
        if resource.kind == "Image" and spec.get("runtime") != "host":
            problem("spec.runtime", "the local provider runs `runtime: host` images only")
        return problems

    def render(self, resource: DesiredResource) -> list[dict[str, Any]]:
        return [{"table": "objects", "address": resource.address, "document": resource.document}]

    # reads ---------------------------------------------------------------------------

    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        jobs = [request.address for request in requests if request.kind == "TrainingJob"]
        observations = {
            address: _job_observation(runs) for address, runs in self.jobs.runs_of(jobs).items()
        }
        requests = [request for request in requests if request.kind != "TrainingJob"]
        adopted = {request.address: _adopted(request.kind, request.outputs) for request in requests}
        rows = self.database.get_many(
            [request.address for request in requests]
            + [found.identifier for found in adopted.values() if found is not None]
        )
        for request in requests:
            row = _row_for(rows, request.address, self.manager, adopted[request.address])
            if row is None:
                observations[request.address] = _absent(rows.get(request.address), request)
            else:
                observations[request.address] = self._observation(request, row)
        return observations

    def _observation(self, request: ObserveRequest, row: Any) -> Observation:
        """What `row` shows of `request`; outputs keep an import's marks while the row is
        still the adopted one (not yet at the address under this manager)."""
        live = json.loads(row["document"])
        stored = json.loads(row["outputs"])
        if request.kind == "Dataset":
            observation = self._observe_dataset(request, live, stored)
        else:
            observation = Observation(
                exists=True, live=live, outputs=_public(stored), evidence=_written(row)
            )
        if row["address"] == request.address and row["manager"] == self.manager:
            return observation
        marks = {ADOPTED: row["address"], ADOPTED_CREATED_AT: row["created_at"]}
        return replace(observation, outputs={**observation.outputs, **marks})

    def _observe_dataset(
        self, request: ObserveRequest, live: dict[str, Any], stored: dict[str, Any]
    ) -> Observation:
        findings = []
        try:
            source = self._source(live["spec"]["source"])
        except PermanentProviderError as exc:
            # What was recorded leaves the allowed folders: report it, read nothing under it.
            finding = Finding("source-refused", str(exc))
            return Observation(exists=True, live=live, outputs=_public(stored), findings=(finding,))
        recorded = stored.get("manifests", {})
        for version in live["spec"]["versions"]:
            name = version["name"]
            try:
                folder = version_folder(source, version)
            except PermanentProviderError as exc:
                findings.append(Finding("source-refused", str(exc)))
                continue
            if not folder.is_dir():
                findings.append(Finding("data-missing", f"version {name}: {folder} does not exist"))
                continue
            current = build_manifest(folder)
            pinned = version.get("manifestDigest")
            previous = manifest_from_json(recorded[name]) if name in recorded else None
            reference = previous.digest if previous else pinned
            if reference and current.digest != reference:
                against = "the recorded manifest" if previous else "the pinned manifestDigest"
                changes = current.differences(previous) if previous else []
                shown = ", ".join(changes[:5]) + ("..." if len(changes) > 5 else "")
                findings.append(
                    Finding(
                        "data-mutated",
                        f"version {name}: content differs from {against}"
                        + (f" ({shown})" if changes else ""),
                        {
                            "version": name,
                            "expected": reference,
                            "found": current.digest,
                            "changes": changes,
                            **_mutation_evidence(folder, changes),
                        },
                    )
                )
        return Observation(
            exists=True, live=live, outputs=_public(stored), findings=tuple(findings)
        )

    def _source(self, source: str) -> Path:
        """The confined host folder of a dataset source (PermanentProviderError if not)."""
        return resolve_source(source, self.spec_root, self.data_roots)

    def resolve(self, resource: DesiredResource) -> dict[str, Any]:
        if resource.kind == "Image":
            facts = host_runtime()
            return {"digest": digest_of(facts), "runtime": facts}
        if resource.kind == "Dataset":
            source = self._source(resource.spec["source"])
            versions = {}
            for version in resource.spec["versions"]:
                folder = version_folder(source, version)
                if not folder.is_dir():
                    raise PermanentProviderError(
                        f"version {version['name']}: {folder} is not a folder"
                    )
                versions[version["name"]] = build_manifest(folder).summary()
            return {"versions": versions}
        return super().resolve(resource)

    def adopt(self, request: ObserveRequest, identifier: str) -> Observation:
        """Read, never write: the observation of the row stored as `identifier`, with the
        row recorded in its outputs (`adopted`); the first planned write moves the row to
        the address and this manager, and until then observe reads it where it is."""
        rows = self._read_only({request.address, identifier})
        if identifier != request.address and request.address in rows:
            raise PermanentProviderError(
                f"cannot adopt {identifier} as {request.address}: an object already exists at "
                f"{request.address}; delete it first or import it under its own address"
            )
        row = rows.get(identifier)
        if row is None or row["kind"] != request.kind:
            return Observation(exists=False)
        return self._observation(request, row)

    def _read_only(self, addresses: set[str] | None = None) -> dict[str, Any]:
        """Rows read without opening the database for writing (import and discover)."""
        try:
            return read_rows(self.root / DATABASE_FILE, addresses)
        except sqlite3.Error as exc:
            raise PermanentProviderError(
                f"cannot read the local platform database under {self.root}: {exc}"
            ) from None

    def adopted_identifiers(self, outputs: dict[str, Any]) -> tuple[str, ...]:
        identifier = outputs.get(ADOPTED)
        return (identifier,) if isinstance(identifier, str) else ()

    def list_owned(self) -> list[tuple[str, str]]:
        return self.database.owned(self.manager)

    def discover(self) -> list[Discovered]:
        found = []
        for row in self._read_only().values():
            stored = json.loads(row["document"])
            metadata = {
                "name": row["name"],
                **({"project": row["project"]} if row["project"] else {}),
            }
            metadata.update({k: v for k, v in stored.get("metadata", {}).items() if v})
            document = {
                "apiVersion": "trainform/v1",
                "kind": row["kind"],
                "metadata": metadata,
                "spec": stored["spec"],
            }
            found.append(Discovered(document, row["address"], "from the local platform database"))
        return found

    # writes --------------------------------------------------------------------------

    def create(self, resource: DesiredResource) -> dict[str, Any]:
        return self._put(resource)

    def update(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        return self._put(resource, _adopted(resource.kind, outputs))

    def _put(self, resource: DesiredResource, adopted: Adopted | None = None) -> dict[str, Any]:
        """Write the object; an imported one is first moved to its address (one transaction)."""
        self.require_valid(resource)
        if resource.kind == "TrainingJob":
            return {}  # the engine submits runs through submit(); nothing runs here
        outputs: dict[str, Any] = {}
        if resource.kind == "Dataset":
            outputs = self._record_dataset(resource, adopted)
        elif resource.kind == "Image":
            facts = host_runtime()
            outputs = {"runtime": "host", "digest": digest_of(facts), **facts}
        row = ObjectRow(
            resource.address,
            resource.kind,
            resource.name,
            resource.project,
            self.manager,
            resource.document,
            outputs,
        )
        try:
            if adopted is None:
                self.database.upsert(row)
            else:
                self.database.move(adopted, row)
        except PermissionError as exc:
            raise PermanentProviderError(str(exc)) from None
        except LookupError as exc:
            raise PermanentProviderError(
                f"cannot write {resource.address}: {exc}; run plan again"
            ) from None
        return _public(outputs)

    def _record_dataset(
        self, resource: DesiredResource, adopted: Adopted | None = None
    ) -> dict[str, Any]:
        source = self._source(resource.spec["source"])
        rows = self.database.get_many(_wanted(resource.address, adopted))
        existing = _row_for(rows, resource.address, self.manager, adopted)
        recorded = json.loads(existing["outputs"]).get("manifests", {}) if existing else {}
        manifests: dict[str, Any] = {}
        versions: dict[str, Any] = {}
        for version in resource.spec["versions"]:
            name = version["name"]
            folder = version_folder(source, version)
            if not folder.is_dir():
                raise PermanentProviderError(f"version {name}: {folder} is not a folder")
            manifest: Manifest = build_manifest(folder)
            pinned = version.get("manifestDigest")
            if pinned and manifest.digest != pinned:
                raise PermanentProviderError(
                    f"version {name}: content has digest {manifest.digest}, but the spec pins "
                    f"{pinned}; the data was changed under a pinned version"
                )
            if name in recorded:
                previous = manifest_from_json(recorded[name])
                if previous.digest != manifest.digest:
                    raise PermanentProviderError(
                        f"version {name}: content changed since it was recorded "
                        f"({', '.join(manifest.differences(previous)[:5])}); versions are "
                        "immutable, declare a new version instead"
                    )
            manifests[name] = manifest_to_json(manifest)
            versions[name] = manifest.summary()
        return {"versions": versions, "manifests": manifests}

    def delete(self, address: str, kind: str, outputs: dict[str, Any]) -> None:
        if kind == "TrainingJob":
            self.jobs.cancel(address)  # every unfinished attempt; checkpoints stay
            return
        adopted = _adopted(kind, outputs)
        rows = self.database.get_many(_wanted(address, adopted))
        row = _row_for(rows, address, self.manager, adopted)
        if row is None:
            _refuse_delete(address, rows, self.manager, adopted)
            return  # gone already
        if kind == "Dataset":
            document = json.loads(row["document"])
            if document["spec"].get("deletionPolicy") == "Delete":
                source = self._source(document["spec"]["source"])
                folders = [version_folder(source, v) for v in document["spec"]["versions"]]
                for folder in folders:
                    shutil.rmtree(folder, ignore_errors=True)
        if adopted is None or (row["address"] == address and row["manager"] == self.manager):
            self.database.delete(address, self.manager)
            return
        try:
            self.database.delete_adopted(adopted)
        except LookupError as exc:
            raise PermanentProviderError(f"cannot delete {address}: {exc}") from None


ADOPTED = "adopted"
"""Outputs key: the address of the row `trainform import` adopted, where it stays until the
first planned write moves it to the resource's address and manager."""
ADOPTED_CREATED_AT = "adoptedCreatedAt"
"""Outputs key: when the adopted row was created: a row made again since is another object."""


def _adopted(kind: str, outputs: dict[str, Any]) -> Adopted | None:
    identifier = outputs.get(ADOPTED)
    if not isinstance(identifier, str):
        return None
    return Adopted(identifier, kind, str(outputs.get(ADOPTED_CREATED_AT, "")))


def _wanted(address: str, adopted: Adopted | None) -> list[str]:
    return [address] + ([adopted.identifier] if adopted is not None else [])


def _row_for(
    rows: dict[str, Any], address: str, manager: str, adopted: Adopted | None
) -> Any | None:
    """The row of a resource: this manager's at its address, else the one its import
    adopted (whoever manages it, while it is the same object), else None."""
    row = rows.get(address)
    if row is not None and row["manager"] == manager:
        return row
    if adopted is not None and adopted.matches(rows.get(adopted.identifier)):
        return rows[adopted.identifier]
    return None


def _refuse_delete(
    address: str, rows: dict[str, Any], manager: str, adopted: Adopted | None
) -> None:
    """PermanentProviderError when the object to delete is there but not this manager's
    (or no longer the one an import adopted); nothing when it is gone."""
    if adopted is not None and adopted.identifier in rows:
        found = rows[adopted.identifier]
        raise PermanentProviderError(
            f"cannot delete {address}: the imported object {adopted.identifier} was replaced "
            f"since the import (now a {found['kind']} created at {found['created_at']}); "
            "trainform deletes only what it adopted"
        )
    if adopted is None and address in rows:
        raise PermanentProviderError(f"{address} is not managed by {manager}")


def _absent(row: Any | None, request: ObserveRequest) -> Observation:
    """Not this manager's: missing, or held at its address by another manager (a finding
    naming that manager, so plan and drift never read a taken-over object as missing)."""
    if row is None:
        return Observation(exists=False)
    message = (
        f"the platform database holds {request.address} as a {row['kind']} managed by "
        f"{row['manager']!r} (last written {row['updated_at']}), not by this trainform"
    )
    evidence = {**_written(row), "identifier": row["address"]}
    return Observation(exists=False, findings=(Finding(MANAGED_BY_OTHER, message, evidence),))


def _job_observation(runs: list[RunStatus]) -> Observation:
    if not runs:
        return Observation(exists=False)
    return Observation(exists=True, live=None, status={"runs": [run_to_json(r) for r in runs]})


def _mutation_evidence(folder: Path, changes: list[str]) -> dict[str, Any]:
    """The files added, removed and changed, and when the newest of them was written (its
    modification time: what a host filesystem records of a change)."""
    split: dict[str, list[str]] = {"added": [], "removed": [], "changed": []}
    for change in changes:
        verb, _, name = change.partition(" ")
        if verb in split:
            split[verb].append(name)
    times = []
    for name in split["added"] + split["changed"]:
        try:
            times.append((folder / name).stat().st_mtime)
        except OSError:
            continue
    evidence: dict[str, Any] = {verb: names for verb, names in split.items() if names}
    if times:
        evidence["modifiedAt"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(max(times)))
    return evidence


def _written(row: Any) -> dict[str, Any]:
    """When the platform database last wrote the object, and by which manager."""
    return {
        "updatedAt": row["updated_at"],
        "generation": row["generation"],
        "manager": row["manager"],
    }


def digest_of(value: Any) -> str:
    """The digest of a JSON value (a host runtime's facts): sha256 of its canonical form."""
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def _public(outputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs worth keeping in state: per-file manifests stay in the platform database."""
    return {key: value for key, value in outputs.items() if key != "manifests"}
