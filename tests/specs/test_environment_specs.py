"""Another environment's specs from one load: templated documents rendered again, the rest kept.

The reference is a full load of that environment: every resource reads the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.specs import SpecLoadError, load_specs
from trainform.specs.environment_specs import environment_specs

from tests.helpers import REPO

PLATFORM = REPO / "examples" / "platform"


def test_another_environment_reads_as_its_own_load_of_the_folder() -> None:
    staging = load_specs(PLATFORM, environment="staging")
    prod = environment_specs(staging, "prod")
    loaded = load_specs(PLATFORM, environment="prod")
    assert prod.environment == "prod"
    assert prod.config == loaded.config
    assert prod.config != staging.config  # its own connections and state
    assert {a: r.document for a, r in prod.resources.items()} == {
        a: r.document for a, r in loaded.resources.items()
    }
    assert {a: r.location for a, r in prod.resources.items()} == {
        a: r.location for a, r in loaded.resources.items()
    }
    templated = {a for a, r in staging.resources.items() if r.templated}
    assert "Image/trainer" in templated and "Dataset/web-corpus" not in templated
    assert len(staging.templates) == len(templated)
    for address, resource in prod.resources.items():
        assert (resource is staging.resources[address]) is (address not in templated)
    assert environment_specs(staging, "staging") is staging


def test_a_document_that_does_not_render_there_is_a_load_error(tmp_path: Path) -> None:
    (tmp_path / "trainform.yaml").write_text(
        "apiVersion: trainform/v1\nproviders: [{name: local, type: local}]\n"
        "environments:\n  a: {variables: {owner: x@example.com}}\n"
        "  b: {state: {backend: local, path: b.json}, providers: {local: {root: b}}}\n"
    )
    (tmp_path / "project.yaml").write_text(
        "apiVersion: trainform/v1\nkind: Project\nmetadata: {name: research}\n"
        'spec: {owners: ["{{ owner }}"]}\n'
    )
    loaded = load_specs(tmp_path, environment="a")
    with pytest.raises(SpecLoadError, match=r"project.yaml:1:1: cannot render document"):
        environment_specs(loaded, "b")
    assert environment_specs(loaded, "b", variables=["owner=y@example.com"]).resources[
        "Project/research"
    ].document.spec.owners == ["y@example.com"]  # type: ignore[attr-defined]
