"""Fixtures of the engine tests: a private copy of the quickstart and fault-injecting providers.

`quickstart` is a copy of examples/quickstart under tmp_path (never the repository's own
folder, so no `.trainform/` is left behind). `faulty_providers(root, fail_on=...)` builds a
ProviderSet whose `local` instances are a FaultyLocalProvider failing as asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.session import ProviderSet
from trainform.specs import load_specs

from tests.engine.support import QUICKSTART, SpecFolder, copy_example, faulty_provider


@pytest.fixture
def quickstart(tmp_path: Path) -> Iterator[SpecFolder]:
    folder = SpecFolder(copy_example(QUICKSTART, tmp_path / "quickstart"))
    yield folder
    folder.close()


@pytest.fixture
def faulty_providers() -> Iterator[Callable[..., ProviderSet]]:
    """`make(root, fail_on=(n,), fail_addresses=(...), error=..., after=False)`."""
    made: list[ProviderSet] = []

    def make(root: Path, **fault: Any) -> ProviderSet:
        config = load_specs(root).config
        providers = ProviderSet(config, root, classes={"local": faulty_provider(**fault)})
        made.append(providers)
        return providers

    yield make
    for providers in made:
        providers.close()
