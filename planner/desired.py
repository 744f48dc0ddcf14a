"""The desired platform: every loaded resource normalized and assigned to provider instances.

Assignment rules: a ResourcePool names its provider; a Queue lives where its pools are (one
provider instance per queue); a Quota and a TrainingJob live with their queue; a Project
lives on every compute provider its quotas and jobs use (all compute providers if none);
a Dataset or Image names its provider or gets one by scheme or runtime; an EvalSuite lives
with the jobs that use it; a ModelRelease on the registry and objectstore instances of its
targets.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainform.planner.errors import PlannerError
from trainform.planner.normalize import normalize_document, spec_hash
from trainform.planner.state import digest
from trainform.specs import SpecSet
from trainform.specs.resource import Resource
from trainform.specs.split_work import map_halves

COMPUTE_TYPES = ("local", "kubernetes", "slurm")
GLOBAL_FOLDER = "_global"


class AssignmentError(PlannerError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("cannot assign providers:\n  " + "\n  ".join(problems))


@dataclass
class DesiredItem:
    address: str
    kind: str
    name: str
    project: str | None
    providers: list[str]
    document: dict[str, Any]
    spec_hash: str
    dependencies: list[str]
    prevent_destroy: bool
    location: str
    references: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(field path, resolved address, dataset version) of each reference."""


def _first_of(specs: SpecSet, types: tuple[str, ...]) -> str | None:
    return next((p.name for p in specs.config.providers if p.type in types), None)


def _assign(specs: SpecSet) -> tuple[dict[str, list[str]], list[str]]:
    problems: list[str] = []
    where: dict[str, list[str]] = {}
    resources = specs.resources
    by_kind: dict[str, list[Resource]] = {}
    for resource in resources.values():
        by_kind.setdefault(resource.kind, []).append(resource)

    def deps_of(resource: Resource, kind: str) -> list[str]:
        return [d.address for d in resource.dependencies if d.reference.kind == kind]

    for pool in by_kind.get("ResourcePool", []):
        where[pool.address] = [pool.document.spec.provider]  # type: ignore[attr-defined]
    for queue in by_kind.get("Queue", []):
        instances = sorted({p for a in deps_of(queue, "ResourcePool") for p in where.get(a, [])})
        if len(instances) > 1:
            problems.append(
                f"{queue.address} ({queue.location}): its pools are on provider instances "
                f"{', '.join(instances)}; a queue admits onto pools of one provider instance"
            )
        where[queue.address] = instances[:1]
    for kind in ("Quota", "TrainingJob"):
        for resource in by_kind.get(kind, []):
            queues = deps_of(resource, "Queue")
            where[resource.address] = list(where.get(queues[0], [])) if queues else []
    compute = [p.name for p in specs.config.providers if p.type in COMPUTE_TYPES]
    used_by_project: dict[str, set[str]] = {}
    for kind in ("Quota", "TrainingJob"):
        for resource in by_kind.get(kind, []):
            if resource.project:
                used_by_project.setdefault(resource.project, set()).update(
                    where.get(resource.address, [])
                )
    slurm = [p.name for p in specs.config.providers if p.type == "slurm"]
    for project in by_kind.get("Project", []):
        # a Project that states Slurm account settings is a Slurm account, not a local one
        accounts = slurm if getattr(project.document.spec, "slurm", None) is not None else []
        where[project.address] = (
            sorted(used_by_project.get(project.name, ())) or accounts or compute
        )
    for kind in ("Dataset", "Image"):
        for resource in by_kind.get(kind, []):
            chosen = artifact_instance(resource, specs)
            where[resource.address] = [chosen] if chosen else []
    suite_users: dict[str, set[str]] = {}
    for job in by_kind.get("TrainingJob", []):
        for suite in deps_of(job, "EvalSuite"):
            suite_users.setdefault(suite, set()).update(where.get(job.address, []))
    for suite in by_kind.get("EvalSuite", []):
        where[suite.address] = sorted(suite_users.get(suite.address, ())) or compute[:1]
    for release in by_kind.get("ModelRelease", []):
        where[release.address] = release_instances(release, specs, problems)
    for address, instances in where.items():
        resource = resources[address]
        if not instances and resource.kind != "ModelRelease":  # its targets said why
            problems.append(
                f"{address} ({resource.location}): no provider instance in trainform.yaml "
                f"can hold a {resource.kind}"
            )
    return where, problems


def artifact_instance(resource: Resource, specs: SpecSet) -> str | None:
    """The provider instance of a Dataset or Image: the one it names, else a Dataset on S3
    goes to the object store and a local one to the local provider, an Image to the
    registry (the local provider for the host runtime, Slurm on a Slurm-only platform)."""
    spec: Any = resource.document.spec  # type: ignore[attr-defined]
    if spec.provider:
        return str(spec.provider)
    if resource.kind == "Dataset":
        if placed_source(spec.source, specs.config.storage.datasets).startswith("s3://"):
            store = specs.config.object_store()
            return store.name if store else None
        return _first_of(specs, ("local",))
    return _first_of(specs, ("local",) if spec.runtime == "host" else ("registry",)) or (
        _first_of(specs, ("slurm",))  # a Slurm-only platform: sbatch runs it
    )


def release_instances(resource: Resource, specs: SpecSet, problems: list[str]) -> list[str]:
    """The instances a ModelRelease publishes through: its registry target's (named, else
    the first registry instance) and its object-store target's (named, else the one that
    holds s3:// data); a named instance of the wrong type is a problem."""
    spec: Any = resource.document.spec  # type: ignore[attr-defined]
    chosen = []
    for target, wanted, path in (
        (spec.registry, "registry", "spec.registry.provider"),
        (spec.object_store, "objectstore", "spec.objectStore.provider"),
    ):
        if target is None:
            continue
        if target.provider:
            instance = specs.config.provider(target.provider)
            if instance is None or instance.type != wanted:
                problems.append(
                    f"{resource.address} ({resource.location}): {path}: "
                    f"`{target.provider}` is no provider instance of type {wanted} in "
                    "trainform.yaml"
                )
                continue
            chosen.append(instance.name)
            continue
        default = _first_of(specs, ("registry",)) if wanted == "registry" else _store_name(specs)
        if default is None:
            problems.append(
                f"{resource.address} ({resource.location}): {path.rsplit('.', 1)[0]}: "
                f"trainform.yaml has no provider instance of type {wanted} to publish to"
            )
            continue
        chosen.append(default)
    return chosen


def _store_name(specs: SpecSet) -> str | None:
    store = specs.config.object_store()
    return str(store.name) if store else None


def placed_source(source: str, base: str) -> str:
    """A dataset source under `storage.datasets` when it is relative and a base is set."""
    if not base or "://" in source:
        return source
    return f"{base}/{source.strip('/')}"


def placed_checkpoints(prefix: str, base: str, project: str | None, name: str) -> str:
    """A checkpoint prefix under `storage.checkpoints`: `<base>/<project>/<job>` when the
    job gives none, `<base>/<prefix>` when it gives a relative one."""
    if not base or "://" in prefix or prefix.startswith("/"):
        return prefix
    return f"{base}/{prefix.strip('/') or f'{project or GLOBAL_FOLDER}/{name}'}"


def placed_document(resource: Resource, specs: SpecSet) -> dict[str, Any]:
    """The normalized document of a resource, its data where trainform.yaml's `storage` says."""
    document = normalize_document(resource.document)
    _placed(document, resource, specs)
    return document


def _placed(document: dict[str, Any], resource: Resource, specs: SpecSet) -> None:
    """Put datasets and checkpoints where trainform.yaml's `storage` says (in place)."""
    storage = specs.config.storage
    spec = document["spec"]
    if resource.kind == "Dataset" and storage.datasets:
        spec["source"] = placed_source(spec["source"], storage.datasets)
    if resource.kind == "TrainingJob" and storage.checkpoints and "checkpoint" in spec:
        checkpoint = spec["checkpoint"]
        checkpoint["prefix"] = placed_checkpoints(
            checkpoint.get("prefix", ""), storage.checkpoints, resource.project, resource.name
        )


def _relative(resource: Resource, specs: SpecSet, cache: dict[str, str]) -> str:
    """`file:line:column` relative to the spec folder, however the folder was spelled."""
    where = resource.location
    relative = cache.get(where.file)
    if relative is None:
        relative = cache[where.file] = Path(
            os.path.relpath(where.file, os.path.normpath(str(specs.root)))
        ).as_posix()
    return f"{relative}:{where.line}:{where.column}"


def build_desired(specs: SpecSet) -> dict[str, DesiredItem]:
    """Normalized desired resources keyed by address, in source order."""
    where, problems = _assign(specs)
    if problems:
        raise AssignmentError(problems)
    desired = {}
    relative: dict[str, str] = {}
    documents = [placed_document(resource, specs) for resource in specs.resources.values()]
    hashes = [h for part in map_halves(_hashes, documents) for h in part]
    for (address, resource), document, hashed in zip(
        specs.resources.items(), documents, hashes, strict=True
    ):
        desired[address] = DesiredItem(
            address=address,
            kind=resource.kind,
            name=resource.name,
            project=resource.project,
            providers=where[address],
            document=document,
            spec_hash=hashed,
            dependencies=sorted({d.address for d in resource.dependencies}),
            prevent_destroy=resource.document.lifecycle.prevent_destroy,
            location=_relative(resource, specs, relative),
            references=[
                (
                    ".".join(str(step) for step in d.reference.path),
                    d.address,
                    d.reference.version,
                )
                for d in resource.dependencies
            ],
        )
    return desired


def _hashes(documents: Sequence[dict[str, Any]]) -> list[str]:
    return [spec_hash(document) for document in documents]


def spec_digest(desired: dict[str, DesiredItem], config: dict[str, Any]) -> str:
    """Digest of everything a plan was computed from on the spec side."""
    return digest(
        {
            "config": config,
            "resources": {a: (d.spec_hash, d.providers) for a, d in sorted(desired.items())},
        }
    )
