"""Helpers for engine tests: a spec folder opened for plan/apply, fault-injecting providers,
the platform database read back, and the installed `trainform` script run in a subprocess.

`SpecFolder` wraps one folder (a copy of an example, or one written by a test) and runs the
library the way the CLI does: load specs, open the state backend named in trainform.yaml,
build a ProviderSet, plan, apply. Provider sets it creates are closed by `close()`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from trainform.planner.apply import ApplyResult, RetryPolicy, apply_plan
from trainform.planner.backends.base import StateBackend
from trainform.planner.plan import PlanOptions, make_plan
from trainform.planner.plan_model import Plan
from trainform.planner.session import ProviderSet
from trainform.planner.state import State
from trainform.planner.workspace import make_backend
from trainform.providers.base import DesiredResource, Provider
from trainform.providers.errors import PermanentProviderError, ProviderError
from trainform.providers.local.provider import LocalProvider
from trainform.specs import SpecSet, load_specs

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"
TRAINFORM = Path(sys.executable).parent / "trainform"
NO_RETRY_DELAY = RetryPolicy(base_delay=0)


LOCAL_CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local, connection: {root: .trainform}}
state: {backend: local, path: .trainform/state.json}
"""


def project(name: str) -> str:
    return (
        "apiVersion: trainform/v1\nkind: Project\n"
        f"metadata: {{name: {name}}}\nspec: {{owners: [team@example.com]}}\n"
    )


def write_folder(root: Path, files: dict[str, str]) -> Path:
    """A spec folder on the local provider: trainform.yaml plus `{relative path: text}`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "trainform.yaml").write_text(LOCAL_CONFIG, encoding="utf-8")
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def copy_example(source: Path, target: Path, jobs: bool = False) -> Path:
    """Copy an example folder, leaving out any `.trainform/` left in the source.

    Without `jobs`, TrainingJob documents are dropped: engine tests about platform
    configuration then never start real training processes (tests/engine/test_jobs_e2e.py
    covers jobs).
    """
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".trainform", "trainform.lock"))
    if not jobs:
        for path in target.rglob("*.yaml"):
            text = path.read_text(encoding="utf-8")
            if "kind: TrainingJob" not in text:
                continue
            documents = text.split("\n---\n")
            kept = [d for d in documents if "kind: TrainingJob" not in d]
            path.write_text("\n---\n".join(kept), encoding="utf-8")
    return target


class FaultyLocalProvider(LocalProvider):
    """The local provider, failing chosen mutating calls (create, update, delete).

    Calls are numbered from 1 across the instance, in the order they start. A call fails
    when its number is in `fail_on` or its address in `fail_addresses`. With `after` set
    the change is made first and the error raised afterwards (the reply was lost), which
    is the harder case for convergence. `calls` records (verb, address) of every call and
    `events` records ("start"|"end", verb, address) for ordering checks.
    """

    fail_on: ClassVar[frozenset[int]] = frozenset()
    fail_addresses: ClassVar[frozenset[str]] = frozenset()
    error: ClassVar[type[ProviderError]] = PermanentProviderError
    after: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        self.events: list[tuple[str, str, str]] = []
        self._count_lock = threading.Lock()

    def _mutate(self, verb: str, address: str, perform: Callable[[], Any]) -> Any:
        with self._count_lock:
            self.calls.append((verb, address))
            self.events.append(("start", verb, address))
            number = len(self.calls)
        failing = number in self.fail_on or address in self.fail_addresses
        message = f"injected failure on call {number} ({verb} {address})"
        try:
            if failing and not self.after:
                raise self.error(message)
            result = perform()
            if failing:
                raise self.error(message)
            return result
        finally:
            with self._count_lock:
                self.events.append(("end", verb, address))

    def create(self, resource: DesiredResource) -> dict[str, Any]:
        perform = super().create
        return self._mutate("create", resource.address, lambda: perform(resource))  # type: ignore[no-any-return]

    def update(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        perform = super().update
        return self._mutate(  # type: ignore[no-any-return]
            "update", resource.address, lambda: perform(resource, outputs)
        )

    def delete(self, address: str, kind: str, outputs: dict[str, Any]) -> None:
        perform = super().delete
        self._mutate("delete", address, lambda: perform(address, kind, outputs))


def faulty_provider(
    fail_on: Iterable[int] = (),
    fail_addresses: Iterable[str] = (),
    error: type[ProviderError] = PermanentProviderError,
    after: bool = False,
) -> type[FaultyLocalProvider]:
    """A FaultyLocalProvider subclass configured to fail as asked (ProviderSet takes classes)."""
    return type(
        "ConfiguredFaultyLocalProvider",
        (FaultyLocalProvider,),
        {
            "fail_on": frozenset(fail_on),
            "fail_addresses": frozenset(fail_addresses),
            "error": error,
            "after": after,
        },
    )


class SpecFolder:
    """One spec folder, planned and applied through the library like the CLI does."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._provider_sets: list[ProviderSet] = []

    # loading ---------------------------------------------------------------------------

    def specs(self) -> SpecSet:
        return load_specs(self.root)

    def backend(self) -> StateBackend:
        return make_backend(self.specs().config, self.root)

    def state(self) -> State | None:
        return self.backend().read()

    def providers(self, local: type[Provider] | None = None) -> ProviderSet:
        classes = {"local": local} if local is not None else None
        providers = ProviderSet(self.specs().config, self.root, classes)
        self._provider_sets.append(providers)
        return providers

    def close(self) -> None:
        for providers in self._provider_sets:
            providers.close()
        self._provider_sets.clear()

    # working ---------------------------------------------------------------------------

    def plan(self, providers: ProviderSet | None = None, **options: Any) -> Plan:
        return make_plan(
            self.specs(),
            self.state(),
            providers or self.providers(),
            PlanOptions(**options),
        )

    def apply(
        self,
        plan: Plan,
        providers: ProviderSet | None = None,
        *,
        parallelism: int = 10,
        retry: RetryPolicy = NO_RETRY_DELAY,
    ) -> ApplyResult:
        return apply_plan(
            plan,
            self.backend(),
            providers or self.providers(),
            parallelism=parallelism,
            retry=retry,
        )

    def converge(self, **options: Any) -> ApplyResult:
        """Plan and apply with a plain local provider; the apply must succeed."""
        providers = self.providers()
        result = self.apply(self.plan(providers, **options), providers)
        assert not result.failed, result.outcomes
        return result

    # editing and reading back -----------------------------------------------------------

    def edit(self, relative: str, old: str, new: str) -> None:
        path = self.root / relative
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{old!r} is not in {relative}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    def drop_document(self, relative: str, kind: str, name: str) -> None:
        """Remove the YAML document declaring `kind` `name` from a multi-document file."""
        path = self.root / relative
        documents = re.split(r"^---\n", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
        kept = [d for d in documents if not (f"kind: {kind}\n" in d and f"  name: {name}\n" in d)]
        assert len(kept) == len(documents) - 1, f"{kind} {name} is not declared once in {relative}"
        path.write_text("---\n".join(kept), encoding="utf-8")

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    @property
    def database_path(self) -> Path:
        return self.root / ".trainform" / "platform.db"

    def database(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.database_path)
        connection.row_factory = sqlite3.Row
        return connection

    def query(self, sql: str, parameters: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        connection = self.database()
        try:
            with connection:
                return list(connection.execute(sql, parameters))
        finally:
            connection.close()

    def rows_per_address(self) -> dict[str, int]:
        rows = self.query("SELECT address, count(*) AS n FROM objects GROUP BY address")
        return {row["address"]: row["n"] for row in rows}

    def document_of(self, address: str) -> dict[str, Any]:
        (row,) = self.query("SELECT document FROM objects WHERE address = ?", (address,))
        return json.loads(row["document"])  # type: ignore[no-any-return]

    def set_document(self, address: str, document: dict[str, Any]) -> None:
        self.query(
            "UPDATE objects SET document = ? WHERE address = ?",
            (json.dumps(document, sort_keys=True), address),
        )

    def reconciled_addresses(self) -> set[str]:
        """Addresses the local provider reconciles (TrainingJob is validated, not applied)."""
        from trainform.planner.desired import build_desired

        return {
            address
            for address, item in build_desired(self.specs()).items()
            if LocalProvider.schemas.get(item.kind) is not None
        }


def simulate_crash(backend: StateBackend) -> None:
    """What a process dying does to an open journal: the file is closed, nothing else."""
    journal = getattr(backend, "_journal", None)
    if journal is not None:
        journal.close()
        backend._journal = None  # type: ignore[attr-defined]


def run_trainform(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The installed console script, colour off, no terminal on stdin, output captured."""
    inherited = {
        key: value
        for key, value in os.environ.items()
        if key not in {"FORCE_COLOR", "TRAINFORM_DEBUG"}
    }
    return subprocess.run(
        [str(TRAINFORM), *args],
        cwd=cwd,
        env={**inherited, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
