"""A spec folder opened for work: its specs, state backend and provider instances."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainform.planner.backends.base import StateBackend
from trainform.planner.backends.local import LocalBackend
from trainform.planner.backends.s3 import S3Backend
from trainform.planner.errors import PlannerError
from trainform.planner.session import ProviderSet
from trainform.planner.variables import check_variables
from trainform.providers.base import Provider
from trainform.specs import RootConfig, SpecSet, load_specs
from trainform.specs.models.config import LocalState, ObjectStoreProvider

LOCK_FILE = "trainform.lock"


@dataclass
class Workspace:
    root: Path
    specs: SpecSet
    backend: StateBackend
    providers: ProviderSet

    @property
    def config(self) -> RootConfig:
        return self.specs.config

    def lock_digest(self) -> str:
        path = self.root / LOCK_FILE
        if not path.exists():
            return ""
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def make_backend(config: RootConfig, root: Path, environment: str | None = None) -> StateBackend:
    """The state backend of `config` (an environment's, when one is selected); its lock
    errors print the `force-unlock` command that reaches this very state."""
    state = config.state
    backend: StateBackend
    if isinstance(state, LocalState):
        path = Path(state.path)
        backend = LocalBackend(path if path.is_absolute() else root / path, state.backups)
    else:
        backend = S3Backend(
            state.bucket,
            state.key,
            _state_store(config, state.provider).connection,
            timeout=state.timeout,
            max_attempts=state.max_attempts,
        )
    folder = str(root)
    backend.unlock_arguments = (
        ("--env", environment) if environment else (),
        (folder,) if folder not in (".", "") else (),
    )
    return backend


def _state_store(config: RootConfig, name: str | None) -> ObjectStoreProvider:
    """The objectstore provider instance whose connection the s3 state backend uses."""
    stores = [p for p in config.providers if isinstance(p, ObjectStoreProvider)]
    if name is not None:
        chosen = [p for p in stores if p.name == name]
        if not chosen:
            known = ", ".join(p.name for p in stores) or "none are declared"
            raise PlannerError(
                f"cannot open state: state.provider `{name}` is not an objectstore provider "
                f"instance in trainform.yaml (objectstore instances: {known})"
            )
        return chosen[0]
    if len(stores) != 1:
        found = f"{len(stores)} are declared" if stores else "none is declared"
        raise PlannerError(
            "cannot open state: the s3 state backend needs an objectstore provider instance "
            f"for its connection, and {found}; name one with state.provider"
        )
    return stores[0]


def open_workspace(
    spec_dir: str,
    environment: str | None = None,
    variables: Sequence[str] = (),
    var_files: Sequence[str] = (),
    provider_classes: dict[str, type[Provider]] | None = None,
) -> Workspace:
    specs = load_specs(spec_dir, environment=environment, variables=variables, var_files=var_files)
    check_variables(specs, variables)
    root = Path(spec_dir)
    return Workspace(
        root=root,
        specs=specs,
        backend=make_backend(specs.config, root, specs.environment),
        providers=ProviderSet(specs.config, root, provider_classes),
    )
