"""Provider problems at plan time name the file, line and column of the offending field."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.plan import PlanError
from planner.provider_checks import parse_field
from tests.engine.support import SpecFolder, project, write_folder

POOL = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: gpus}
spec:
  provider: local
  nodes: 3
  cpu: 1
  memory: 1Gi
"""


@pytest.mark.parametrize(
    ("field", "path"),
    [
        pytest.param("spec.nodes", ("spec", "nodes"), id="plain"),
        pytest.param(
            "spec.pools[0].lendingLimit.gpu",
            ("spec", "pools", 0, "lendingLimit", "gpu"),
            id="indexed",
        ),
        pytest.param("spec", ("spec",), id="one-step"),
    ],
)
def test_parse_field_reads_dotted_paths_with_indexes(field: str, path: tuple) -> None:
    assert parse_field(field) == path


def test_a_provider_problem_names_the_line_of_its_field(tmp_path: Path) -> None:
    root = write_folder(tmp_path / "specs", {"team.yaml": project("team"), "pool.yaml": POOL})
    folder = SpecFolder(root)
    try:
        with pytest.raises(PlanError) as raised:
            folder.plan()
    finally:
        folder.close()
    message = str(raised.value)
    assert "ResourcePool/gpus (pool.yaml:6:10): spec.nodes:" in message, message
    assert "exactly one node" in message
