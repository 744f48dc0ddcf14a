"""Environments as isolated targets: their overrides, and the check that they stay apart.

An environment of `trainform.yaml` may replace the state backend (`state:`) and override
fields of each provider instance's connection (`providers: {INSTANCE: {field: value}}`).
`environment_config` gives the configuration one environment runs against; the loader
(specs.loader) calls it once per load, after `check_environments` found no error.

`check_environments` holds the rule that makes environments worth having: two
environments never resolve to the same state location nor to the same endpoint of a
provider that owns what it writes, since applying one would then change what the other
manages. What counts as an endpoint, per provider type (`endpoint_identity`):

- local: the folder of its platform (`root`);
- kubernetes: kubeconfig, context, namespacePrefix and namePrefix together (prefixes are how
  two trainform instances share a cluster without touching each other's objects);
- slurm: slurm.conf and the cluster name.

Object stores and registries are data services that environments may share (staging
rehearses prod on the same datasets and images), but not write differently: every
environment runs under the same manager name, so ownership markers do not tell them apart.
`environments_sharing_data` finds the pairs of environments that reach a common objectstore
or registry endpoint (`data_endpoint`: the endpoint URL, or AWS and the region when there is
none; the registry URL); `trainform validate` then renders the specs of each such pair
(specs.environment_specs) and refuses a location both write with different documents (a
Dataset's source, a promoted Image's tag, a TrainingJob's checkpoint prefix:
planner/shared_writes.py). The same document at the same location is allowed: a rehearsal
that writes the same bytes. A state kept in an object store is covered by the state
location.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError
from trainform.specs.errors import Diagnostic, Location, Severity
from trainform.specs.models.config import Environment, LocalState, RootConfig
from trainform.specs.suggest import closest_name
from trainform.specs.validation import diagnostics_from_errors

ConfigLocator = Callable[[Sequence[str | int], bool], Location]
"""Where a path of trainform.yaml is: (path, whether the key rather than the value)."""


def _connection_class(instance: BaseModel) -> type[BaseModel]:
    return type(instance.connection)  # type: ignore[attr-defined]


def _merged_connection(instance: BaseModel, override: dict[str, Any]) -> BaseModel:
    """The instance's connection with the environment's fields laid over it (validated)."""
    base = instance.connection.model_dump(by_alias=True, exclude_unset=True)  # type: ignore[attr-defined]
    return _connection_class(instance).model_validate({**base, **override})


def environment_config(config: RootConfig, name: str | None) -> RootConfig:
    """The configuration environment `name` runs against (the shared one when None)."""
    if name is None or name not in config.environments:
        return config
    environment = config.environments[name]
    if environment.state is None and not environment.providers:
        return config
    overrides = environment.providers
    providers = [
        instance.model_copy(
            update={"connection": _merged_connection(instance, overrides[instance.name])}
        )
        if instance.name in overrides
        else instance
        for instance in config.providers
    ]
    return config.model_copy(
        update={"state": environment.state or config.state, "providers": providers}
    )


def state_location(config: RootConfig, root: Path) -> str:
    """The state location as plans record and show it: s3://bucket/key, or an absolute path."""
    state = config.state
    if isinstance(state, LocalState):
        path = Path(state.path)
        return str((path if path.is_absolute() else root / path).resolve())
    return f"s3://{state.bucket}/{state.key.strip('/')}"


def state_identity(config: RootConfig, root: Path) -> str:
    """Where the state of `config` lives, spelled so that equal means the same place."""
    state = config.state
    if isinstance(state, LocalState):
        return "file://" + os.path.normpath(os.path.join(os.path.abspath(root), state.path))
    store = config.provider(state.provider) if state.provider else config.object_store()
    endpoint = store.connection.endpoint_url if store is not None else ""
    return f"s3://{state.bucket}/{state.key} at {endpoint or 'AWS'}"


def endpoint_identity(instance: Any, root: Path) -> str:
    """What a provider instance writes to; two instances with the same identity collide.
    Empty for the shared data services (objectstore, registry)."""
    connection = instance.connection
    kind = instance.type
    if kind == "local":
        folder = os.path.normpath(os.path.join(os.path.abspath(root), connection.root))
        return f"local folder {folder}"
    if kind == "kubernetes":
        return (
            f"kubernetes context `{connection.context or '(current)'}` of kubeconfig "
            f"`{connection.kubeconfig or '(default)'}` with namespacePrefix "
            f"`{connection.namespace_prefix}` and namePrefix `{connection.name_prefix}`"
        )
    if kind == "slurm":
        return f"slurm cluster `{connection.cluster}` of {connection.conf}"
    return ""


DEFAULT_PORTS = {"https": "443", "http": "80"}


def _normal_url(url: str) -> str:
    """scheme://host[:port]/path in lower case, without a default port or trailing slash."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), parts.netloc.lower()
    if parts.port is not None and str(parts.port) == DEFAULT_PORTS.get(scheme):
        host = host.rsplit(":", 1)[0]
    return f"{scheme}://{host}{parts.path.rstrip('/')}" if scheme else url.strip().rstrip("/")


def data_endpoint(instance: Any) -> str:
    """The data service an objectstore or registry instance reaches, spelled so that equal
    means the same service; empty for other provider types."""
    connection = instance.connection
    if instance.type == "objectstore":
        if connection.endpoint_url:
            return f"S3 endpoint {_normal_url(connection.endpoint_url)}"
        return f"AWS S3 in region {connection.region or '(default)'}"
    if instance.type == "registry":
        return f"registry {_normal_url(connection.url)}"
    return ""


def data_endpoints(config: RootConfig) -> set[str]:
    """Every objectstore and registry endpoint `config` reaches."""
    return {data_endpoint(instance) for instance in config.providers} - {""}


def environments_sharing_data(
    config: RootConfig, selected: str | None
) -> list[tuple[str, str, frozenset[str]]]:
    """(environment, other, the data endpoints both reach) for each pair of environments of
    `config` (as written, before overrides) that reach a common objectstore or registry:
    `selected` with each other environment, or every pair when none is selected."""
    reached = {
        name: data_endpoints(environment_config(config, name)) for name in config.environments
    }
    names = list(reached)
    if selected in reached:
        pairs = [(selected, other) for other in names if other != selected]
    else:
        pairs = [(name, other) for index, name in enumerate(names) for other in names[:index]]
    found = [(name, other, frozenset(reached[name] & reached[other])) for name, other in pairs]
    return [pair for pair in found if pair[2]]


def check_environments(config: RootConfig, root: Path, locate: ConfigLocator) -> list[Diagnostic]:
    """Errors for overrides that do not apply and for environments that share a target."""
    diagnostics: list[Diagnostic] = []
    for name, environment in config.environments.items():
        diagnostics += _override_errors(config, name, environment, locate)
    if diagnostics or len(config.environments) < 2:
        return diagnostics
    resolved = {name: environment_config(config, name) for name in config.environments}
    names = list(config.environments)
    for position, name in enumerate(names):
        for other in names[:position]:
            diagnostics += _shared_targets(resolved, root, name, other, locate)
    return diagnostics


def _override_errors(
    config: RootConfig, name: str, environment: Environment, locate: ConfigLocator
) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    known = [instance.name for instance in config.providers]
    for instance_name, override in environment.providers.items():
        where: tuple[str | int, ...] = ("environments", name, "providers", instance_name)
        instance = config.provider(instance_name)
        if instance is None:
            suggestion = closest_name(instance_name, known)
            found.append(
                Diagnostic(
                    Severity.ERROR,
                    "unknown-provider",
                    f"environment `{name}` overrides provider instance `{instance_name}`, "
                    "which trainform.yaml does not declare",
                    locate(where, True),
                    field=".".join(str(step) for step in where),
                    expected="one of " + ", ".join(f"`{n}`" for n in known) if known else "",
                    suggestion=suggestion,
                )
            )
            continue
        try:
            _merged_connection(instance, override)
        except ValidationError as exc:
            errors = [{**error, "loc": (*where, *error["loc"])} for error in exc.errors()]
            found += diagnostics_from_errors(errors, None, locate, strip_tag=False)  # type: ignore[arg-type]
    state = environment.state
    store = getattr(state, "provider", None)
    if store and not any(p.name == store and p.type == "objectstore" for p in config.providers):
        found.append(
            Diagnostic(
                Severity.ERROR,
                "unknown-provider",
                f"environment `{name}`: state.provider `{store}` is not an objectstore "
                "provider instance",
                locate(("environments", name, "state", "provider"), False),
                field=f"environments.{name}.state.provider",
            )
        )
    return found


def _shared_targets(
    resolved: dict[str, RootConfig],
    root: Path,
    name: str,
    other: str,
    locate: ConfigLocator,
) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    mine, theirs = resolved[name], resolved[other]
    declared = mine.environments[name]
    location = state_identity(mine, root)
    if location == state_identity(theirs, root):
        path: tuple[str, ...] = ("environments", name, "state")
        found.append(
            Diagnostic(
                Severity.ERROR,
                "shared-environment",
                f"environments `{other}` and `{name}` share the state location {location}",
                locate(path if declared.state else ("environments", name), declared.state is None),
                field=".".join(path),
                expected="a state location of its own for every environment",
                suggestion="",
                detail="give the environment its own `state:` (another path, bucket or key); "
                "applying one environment must never change what another manages",
            )
        )
    others = {endpoint_identity(p, root): p.name for p in theirs.providers}
    for instance in mine.providers:
        identity = endpoint_identity(instance, root)
        if not identity or identity not in others:
            continue
        path = ("environments", name, "providers", instance.name)
        overridden = instance.name in declared.providers
        found.append(
            Diagnostic(
                Severity.ERROR,
                "shared-environment",
                f"environments `{other}` and `{name}` share a provider endpoint: "
                f"instance `{instance.name}` of `{name}` and `{others[identity]}` of "
                f"`{other}` both reach the {identity}",
                locate(path if overridden else ("environments", name), not overridden),
                field=".".join(path),
                expected="a connection of its own for every environment",
                detail=f"override the connection of `{instance.name}` under "
                f"environments.{name}.providers (another context, cluster, endpoint or root)",
            )
        )
    return found


PRODUCTION_NAMES = frozenset({"prod", "production"})


def is_production(config: RootConfig, name: str | None) -> bool:
    """Whether environment `name` is production: its `production` field, else its name
    (prod, production). No environment selected counts as production when trainform.yaml
    declares a production environment and no default one (its shared state may be it)."""
    if name is None:
        return any(is_production(config, other) for other in config.environments)
    environment = config.environments.get(name)
    if environment is not None and environment.production is not None:
        return environment.production
    return name.lower() in PRODUCTION_NAMES
