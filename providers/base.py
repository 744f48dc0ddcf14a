"""The provider interface: how the engine reads and changes a platform.

Contract (every provider passes tests/providers/contract/ against its real backend):

- `configure(instance, context)` once, before anything else; may check connectivity.
- `validate(resource)` and `render(resource)` are pure: no I/O. `validate` returns
  problems the spec language cannot see (capacity beyond this machine, say); `render`
  returns the concrete objects a resource becomes, for plans and reviews.
- `observe(resources)` is read-only and batched: one call for many resources, one
  Observation per address. "Not found" is a value (`exists=False`), never an error. A
  failed read raises a ProviderError: the engine must never mistake it for "missing".
- `create`, `update`, `delete` are idempotent: creating what exists converges it, deleting
  what is gone succeeds. They return the outputs to keep in state. They never block on
  long work (a job's create submits it; its progress is observed).
- A provider only changes objects that carry its ownership mark (manager and address).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar


class ReplaceOrder(enum.StrEnum):
    DELETE_FIRST = "delete-first"
    CREATE_FIRST = "create-first"


@dataclass(frozen=True)
class KindSchema:
    """How the engine treats a kind's fields on one provider.

    Paths are dotted prefixes of the normalized document (`spec.source`); a change under a
    `forces_replacement` prefix replaces the object, under `ignored` is not compared,
    anything else updates in place. `computed` names outputs known only after apply,
    `sensitive` output names are never written to state or shown.
    """

    kind: str
    forces_replacement: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    computed: tuple[str, ...] = ()
    sensitive: tuple[str, ...] = ()
    replace_order: ReplaceOrder = ReplaceOrder.DELETE_FIRST
    data_bearing: bool = False


@dataclass(frozen=True)
class DesiredResource:
    """What the engine asks a provider to make true, in normalized form."""

    address: str
    kind: str
    name: str
    project: str | None
    document: dict[str, Any]
    outputs_of_dependencies: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def spec(self) -> dict[str, Any]:
        return self.document["spec"]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ObserveRequest:
    """One resource to observe: its normalized document and the outputs recorded in state."""

    address: str
    kind: str
    name: str
    project: str | None
    document: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Observation:
    """What a provider saw of one resource."""

    exists: bool
    live: dict[str, Any] | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    evidence: dict[str, Any] = field(default_factory=dict)
    """Who and when the platform recorded for the last change of the live object (e.g.
    `changedAt`, `changedBy`), where it keeps them; drift shows it on a modified finding."""
    # where a part of the live document lives on the platform, by path prefix
    # (`spec.slurm.qos` -> `QOS gold`): drift names the object next to each change
    places: dict[str, str] = field(default_factory=dict)


MANAGED_BY_OTHER = "managed-by-other"
"""Finding kind: at the resource's place the platform holds an object of another manager
(its evidence names the `manager` and the `identifier` to import it by); the resource is
observed as absent, and plan refuses to create it (planner/foreign_objects.py)."""


@dataclass(frozen=True)
class Finding:
    """Something observed that is wrong besides a field difference (data mutated...)."""

    kind: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    warning: bool = False  # advice about the live setup, not a difference: never drift
    unsettled: bool = False
    """The live objects are not what an apply leaves although their fields match (one is
    Terminating, one is left over): the plan updates the resource, this message its reason."""


@dataclass(frozen=True)
class ProviderContext:
    """What a provider may know of its surroundings: the spec folder, the manager name, the
    connection settings (no secrets) of the objectstore instance that holds s3:// datasets
    and checkpoints, if there is one, and the host folders besides the spec folder that
    file:// dataset sources may name (trainform.yaml's security.dataRoots and a file://
    storage.datasets base)."""

    spec_root: Path
    manager: str = "trainform"
    object_store: dict[str, Any] | None = None
    data_roots: tuple[str, ...] = ()


@dataclass(frozen=True)
class Discovered:
    """A live object trainform could manage, written as a spec (trainform import --from).

    `document` is what a user would write: apiVersion, kind, metadata (name, and project for
    project-scoped kinds), spec in camelCase. `identifier` is what `adopt` takes for it.
    Planning right after the import must show no changes, so the document states every
    field the provider compares.
    """

    document: dict[str, Any]
    identifier: str
    comment: str = ""


@dataclass(frozen=True)
class ValidationProblem:
    address: str
    field: str
    message: str


class Provider(ABC):
    """Base of every provider; see the module docstring for the contract."""

    type: ClassVar[str]
    schemas: ClassVar[dict[str, KindSchema]]
    import_ids: ClassVar[str] = "cannot import objects"
    """What `trainform import ADDRESS ID` takes as ID on this provider type, per kind."""

    def __init__(self) -> None:
        self.name = ""

    def configure(self, name: str, connection: Any, context: ProviderContext) -> None:
        self.name = name

    def supports(self, kind: str) -> bool:
        return kind in self.schemas

    def validate(self, resource: DesiredResource) -> list[ValidationProblem]:
        return []

    def validate_all(self, resources: list[DesiredResource]) -> list[ValidationProblem]:
        """Problems that only show across resources (a cohort cycle, say); pure, no I/O.
        Called once per plan with every resource this instance reconciles."""
        return []

    def render(self, resource: DesiredResource) -> list[dict[str, Any]]:
        return []

    def read_settings(self) -> None:
        """Read the platform settings `plan_warnings` checks (a scheduler's configuration,
        say); called once by a plan that refreshes, before `plan_warnings`. Never raises:
        what cannot be read is itself something to warn of."""
        return None

    def plan_warnings(self, resource: DesiredResource) -> list[str]:
        """What the plan should warn about a resource, one readable line each, that is not
        drift (what this provider cannot check from here); pure, no I/O."""
        return []

    def change_impact(self, resource: DesiredResource, observation: Observation) -> list[str]:
        """What an update of `resource` does to work already running (workloads a lower
        quota leaves over it, say), one readable line each, for the plan; read-only."""
        return []

    def delete_impact(self, address: str, kind: str, outputs: dict[str, Any]) -> list[str]:
        """What a delete of the resource leaves in place or affects beyond it (an object
        something else still uses, say), one readable line each, for the plan; read-only."""
        return []

    def change_steps(
        self, resource: DesiredResource, action: str, observation: Observation | None
    ) -> list[str]:
        """The steps a create, update or replace (`action`) of `resource` takes on this
        provider beyond writing its objects (what a controller's finalizers make it do
        first, say), one line each, as reasons in the plan; read-only. `observation` is
        None in a plan without refresh."""
        return []

    def require_valid(self, resource: DesiredResource) -> None:
        """Raise PermanentProviderError naming every problem `validate` finds."""
        from trainform.providers.errors import PermanentProviderError

        problems = self.validate(resource)
        if problems:
            raise PermanentProviderError("; ".join(f"{p.field}: {p.message}" for p in problems))

    @abstractmethod
    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        """Observations keyed by address, for every address asked."""

    @abstractmethod
    def create(self, resource: DesiredResource) -> dict[str, Any]: ...

    @abstractmethod
    def update(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]: ...

    @abstractmethod
    def delete(self, address: str, kind: str, outputs: dict[str, Any]) -> None: ...

    def recreate(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        """Create again what state records (`outputs`) but the platform no longer has
        (deleted outside trainform). Default: `create`. A provider whose outputs record how
        the object is owned (adopted by import) writes it back as that owner."""
        return self.create(resource)

    def resolve(self, resource: DesiredResource) -> dict[str, Any]:
        """Content pins of a resource for `trainform.lock`: an Image's digest
        ({"digest": ...}), a Dataset's manifest digest per version
        ({"versions": {name: {"manifestDigest": ...}}}). Read-only."""
        from trainform.providers.errors import PermanentProviderError

        raise PermanentProviderError(
            f"provider type {self.type} cannot resolve {resource.kind} content"
        )

    def adopt(self, request: ObserveRequest, identifier: str) -> Observation:
        """Take the live object `identifier` under `request.address` (trainform import).

        Read-only: import writes nothing to the platform. Returns the object's observation,
        whose `live` and `outputs` state keeps, so the plan right after is empty. A provider
        records the adoption in those outputs (`adopted`, with what it needs to recognise
        the object later); the object gets this instance's ownership mark with the first
        write a plan shows for it, which first checks it is still the object adopted.
        """
        from trainform.providers.errors import PermanentProviderError

        raise PermanentProviderError(f"provider type {self.type} cannot import objects")

    def discover(self) -> list[Discovered]:
        """Every live object of the kinds this provider reconciles, as specs, read-only."""
        from trainform.providers.errors import PermanentProviderError

        raise PermanentProviderError(f"provider type {self.type} cannot generate specs")

    def list_owned(self) -> list[tuple[str, str]]:
        """(address, kind) of every object this provider instance marks as trainform's."""
        return []

    def adopted_identifiers(self, outputs: dict[str, Any]) -> tuple[str, ...]:
        """Addresses in `list_owned` that a state entry with these outputs stands for
        besides its own: an object imported under another address and not yet written
        (so not yet moved). Orphan detection counts them as known. Pure."""
        return ()

    def close(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing
        """Release connections; called once at the end of a run."""
