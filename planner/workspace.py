"""A spec folder opened for work: its specs, state backend and provider instances."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from planner.backends.base import StateBackend
from planner.backends.local import LocalBackend
from planner.errors import PlannerError
from planner.session import ProviderSet
from providers.base import Provider
from specs import RootConfig, SpecSet, load_specs
from specs.models.config import LocalState

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


def make_backend(config: RootConfig, root: Path) -> StateBackend:
    state = config.state
    if isinstance(state, LocalState):
        path = Path(state.path)
        return LocalBackend(path if path.is_absolute() else root / path, state.backups)
    raise PlannerError(
        "cannot open state: the s3 state backend is not part of this release (issue 5); "
        "use `state: {backend: local}`"
    )


def open_workspace(
    spec_dir: str,
    environment: str | None = None,
    variables: Sequence[str] = (),
    var_files: Sequence[str] = (),
    provider_classes: dict[str, type[Provider]] | None = None,
) -> Workspace:
    specs = load_specs(spec_dir, environment=environment, variables=variables, var_files=var_files)
    root = Path(spec_dir)
    return Workspace(
        root=root,
        specs=specs,
        backend=make_backend(specs.config, root),
        providers=ProviderSet(specs.config, root, provider_classes),
    )
