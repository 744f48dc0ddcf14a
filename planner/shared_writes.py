"""What environments write on the data services they share, and the check that they agree.

Environments may reach the same objectstore or registry endpoint (specs.environments): staging
rehearses prod on the same datasets and images. What their specs WRITE there must still be
the same or apart: every environment runs under the same manager name, so ownership markers
do not tell environments apart, and applying one would overwrite what the other wrote. The
writes, keyed by endpoint and location (`collect_writes`):

- a Dataset on an objectstore instance: its source as placed (storage.datasets), where the
  provider writes the marker `prefix/.trainform/dataset.json` and the readers tags;
- a promoted Image (`spec.promotedFrom`) on a registry instance: the target
  registry/repository:tag and its ownership marker (a referenced Image writes nothing);
- a TrainingJob whose checkpoint prefix, as placed (storage.checkpoints), is on S3: the
  prefix, on the object store checkpoints go to (storage.provider, else the only one).

`shared_write_diagnostics` takes every environment that shares a data endpoint with the one
validated (environments_sharing_data), renders its templated documents again with the same
--var and --var-file (specs.environment_specs: an untemplated document reads the same in
every environment, so the folder is not loaded twice), and reports each location both write
with different normalized documents, or from different resources, at the field of the
validated environment's spec; the same document is allowed (a rehearsal writing the same
bytes). `trainform validate` calls it only when such a pair exists. No provider is
contacted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from trainform.planner.desired import (
    artifact_instance,
    placed_checkpoints,
    placed_document,
    placed_source,
)
from trainform.providers.oci.references import image_target, url_host
from trainform.specs import Diagnostic, Location, Resource, Severity, SpecError, SpecSet
from trainform.specs.environment_specs import environment_specs
from trainform.specs.environments import data_endpoint, environments_sharing_data
from trainform.specs.validation import format_path

if TYPE_CHECKING:
    from trainform.planner.provider_checks import FieldLocator

CODE = "shared-environment"
MAX_FIELDS_SHOWN = 5
HINTS = {
    "dataset source": "`source: s3://{{ datasetBucket }}/...`",
    "promoted tag": "`reference: registry.example.com/{{ releaseRepository }}/...`",
    "checkpoint prefix": "`prefix: s3://{{ checkpointBucket }}/...` (under storage.checkpoints: "
    '`prefix: "{{ environment }}/<job>"`)',
}


@dataclass(frozen=True, slots=True)
class SharedWrite:
    """One place on a data service that a resource of an environment writes."""

    endpoint: str
    """The data service (specs.environments.data_endpoint)."""
    location: str
    """s3://bucket/prefix, or registry/repository:tag."""
    what: str
    field: tuple[str | int, ...]
    """The spec field that names the location."""
    resource: Resource
    at_key: bool = False
    """Point at the field's key (a mapping that leaves the location to `storage`)."""

    @property
    def address(self) -> str:
        return self.resource.address


class _Targets(NamedTuple):
    """What one environment's configuration says about where resources write."""

    specs: SpecSet
    endpoints: dict[str, str]
    """Data endpoint of each objectstore and registry instance, by name."""
    checkpoints: str
    """Data endpoint of the object store that s3:// checkpoints go to ("" if none)."""
    checkpoint_base: str
    """storage.checkpoints: where relative and omitted checkpoint prefixes go."""


def _targets(specs: SpecSet) -> _Targets:
    config = specs.config
    endpoints = {p.name: data_endpoint(p) for p in config.providers}
    store = config.object_store()
    checkpoints = endpoints.get(store.name, "") if store else ""
    return _Targets(specs, endpoints, checkpoints, config.storage.checkpoints)


def _dataset_write(resource: Resource, targets: _Targets) -> SharedWrite | None:
    config = targets.specs.config
    instance = config.provider(artifact_instance(resource, targets.specs) or "")
    if instance is None or instance.type != "objectstore":
        return None
    spec: Any = resource.document.spec  # type: ignore[attr-defined]
    source = placed_source(spec.source, config.storage.datasets)
    return SharedWrite(
        targets.endpoints[instance.name], source.rstrip("/"), "dataset source",
        ("spec", "source"), resource,
    )  # fmt: skip


def _image_write(resource: Resource, targets: _Targets) -> SharedWrite | None:
    spec: Any = resource.document.spec  # type: ignore[attr-defined]
    if not spec.promoted_from:
        return None
    instance = targets.specs.config.provider(artifact_instance(resource, targets.specs) or "")
    if instance is None or instance.type != "registry":
        return None
    scheme, host = url_host(instance.connection.url)
    try:
        target = image_target({"reference": spec.reference}, scheme)
    except ValueError:
        return None  # the registry provider refuses it at plan
    where = f"{target.registry or host}/{target.repository}"
    return SharedWrite(
        targets.endpoints[instance.name],
        f"{where}:{target.tag}" if target.tag else f"{where}@{target.digest}",
        "promoted tag", ("spec", "reference"), resource,
    )  # fmt: skip


def _checkpoint_write(resource: Resource, targets: _Targets) -> SharedWrite | None:
    checkpoint = resource.document.spec.checkpoint  # type: ignore[attr-defined]
    if checkpoint is None or not targets.checkpoints:
        return None
    base = targets.checkpoint_base
    prefix = placed_checkpoints(checkpoint.prefix, base, resource.project, resource.name)
    if not prefix.startswith("s3://"):
        return None
    field = ("spec", "checkpoint", "prefix") if checkpoint.prefix else ("spec", "checkpoint")
    return SharedWrite(
        targets.checkpoints, prefix.rstrip("/"), "checkpoint prefix", field, resource,
        at_key=not checkpoint.prefix,
    )  # fmt: skip


WRITERS = {"Dataset": _dataset_write, "Image": _image_write, "TrainingJob": _checkpoint_write}


def collect_writes(
    specs: SpecSet,
    endpoints: Iterable[str] | None = None,
    resources: Iterable[Resource] | None = None,
) -> dict[tuple[str, str], SharedWrite]:
    """What the resources of `specs` (or `resources` of it) write on data services, keyed by
    (endpoint, location); only on `endpoints` when given. The first writer of a place is kept."""
    wanted = None if endpoints is None else set(endpoints)
    targets = _targets(specs)
    writes: dict[tuple[str, str], SharedWrite] = {}
    for resource in specs.resources.values() if resources is None else resources:
        writer = WRITERS.get(resource.kind)
        write = writer(resource, targets) if writer else None
        if write is not None and (wanted is None or write.endpoint in wanted):
            writes.setdefault((write.endpoint, write.location), write)
    return writes


def differing_fields(mine: Any, theirs: Any, path: str = "") -> list[str]:
    """Dotted paths where two normalized documents differ (lists compared whole)."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        found = []
        for key in sorted({*mine, *theirs}, key=str):
            inner = f"{path}.{key}" if path else str(key)
            found += differing_fields(mine.get(key), theirs.get(key), inner)
        return found
    return [] if mine == theirs else [path or "(document)"]


def shared_write_diagnostics(
    specs: SpecSet,
    variables: Iterable[str] | Mapping[str, Any] = (),
    var_files: Sequence[str | os.PathLike[str]] = (),
) -> list[Diagnostic]:
    """One error per location that the validated environment and another environment
    sharing the data service write with different documents."""
    pairs = environments_sharing_data(specs.base_config or specs.config, specs.environment)
    rendered: dict[str, SpecSet | None] = {}

    def specs_of(name: str) -> SpecSet | None:
        if name not in rendered:
            try:
                rendered[name] = environment_specs(specs, name, variables, var_files)
            except SpecError:
                rendered[name] = None  # its own `validate --env` reports why
        return rendered[name]

    writes: dict[str, dict[tuple[str, str], SharedWrite]] = {}
    diagnostics: list[Diagnostic] = []
    for name, other, endpoints in pairs:
        mine, theirs = specs_of(name), specs_of(other)
        if mine is None or theirs is None:
            failed = name if mine is None else other
            diagnostics.append(_not_compared(name, other, failed))
            continue
        if name not in writes:
            writes[name] = collect_writes(mine)
        diagnostics += _conflicts(name, mine, writes[name], other, theirs, endpoints)
    return sorted(diagnostics, key=Diagnostic.sort_key)


def _conflicts(
    name: str,
    mine: SpecSet,
    my_writes: dict[tuple[str, str], SharedWrite],
    other: str,
    theirs: SpecSet,
    endpoints: frozenset[str],
) -> list[Diagnostic]:
    their_resources: Iterable[Resource] = theirs.resources.values()
    if _targets(theirs)[1:] == _targets(mine)[1:]:
        # untemplated resources are the same objects in both, written to the same places
        their_resources = [r for r in their_resources if r.templated]
    locator: FieldLocator | None = None
    found = []
    for key, their in collect_writes(theirs, endpoints, their_resources).items():
        write = my_writes.get(key)
        if write is None or their.resource is write.resource:
            continue  # an untemplated document reads the same in every environment
        if write.address == their.address:
            fields = differing_fields(
                placed_document(write.resource, mine), placed_document(their.resource, theirs)
            )
            if not fields:
                continue  # the same document: a rehearsal writing the same bytes
            shown = ", ".join(fields[:MAX_FIELDS_SHOWN])
            more = len(fields) - MAX_FIELDS_SHOWN
            differs = (f"{shown} (+{more} more)" if more > 0 else shown) + " differ"
        else:
            differs = f"{their.address} of `{other}` writes it too"
        if locator is None:
            from trainform.planner.provider_checks import FieldLocator  # ruamel: only now

            locator = FieldLocator(mine)
        line, column = locator.position(write.resource, write.field, write.at_key)
        found.append(
            Diagnostic(
                Severity.ERROR,
                CODE,
                f"environments `{other}` and `{name}` both write the {write.what} "
                f"{write.location} on the {write.endpoint}, with different specs",
                Location(write.resource.location.file, line, column),
                field=format_path(write.field),
                expected=f"a {write.what} of its own in every environment, or the same "
                "document in both",
                found=differs,
                address=write.address,
                detail=f"template the location by environment, e.g. {HINTS[write.what]}, with "
                "a value per environment in trainform.yaml, or declare the same document in "
                f"both;\napplying `{name}` would overwrite what `{other}` wrote there",
            )
        )
    return found


def _not_compared(name: str, other: str, failed: str) -> Diagnostic:
    return Diagnostic(
        Severity.WARNING,
        CODE,
        f"environments `{other}` and `{name}` share a data service, but the specs of "
        f"`{failed}` do not load, so what they write there was not compared",
        detail=f"run `trainform validate --env {failed}` to see why",
    )
