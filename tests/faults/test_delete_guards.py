"""Deletion guards per tenant: emptying one project or one provider instance needs a flag.

The whole-state share guard misses a team folder deleted by mistake (4 of 159 resources);
these cases run the CLI on a small local platform and check the refusal, that it names the
guard, that nothing changed, and that `--allow-mass-delete` or deleting the Project in the
same change lets it through.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import CONFIG, run_cli, write_tree

PLATFORM = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: here}
spec: {provider: local, nodes: 1, cpu: 2, memory: 2Gi}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: training}
spec:
  pools: [{pool: here, nominalQuota: {cpu: 1, memory: 1Gi}}]
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: batch}
spec:
  pools: [{pool: here, nominalQuota: {cpu: 1, memory: 1Gi}}]
"""


def project(name: str) -> str:
    return (
        f"apiVersion: trainform/v1\nkind: Project\nmetadata: {{name: {name}}}\n"
        "spec: {owners: [a@example.com]}\n"
    )


def team(name: str) -> str:
    return "---\n".join(
        f"apiVersion: trainform/v1\nkind: Quota\nmetadata: {{name: {name}-{queue}, "
        f"project: {name}}}\nspec: {{queue: {queue}, limits: {{cpu: 1, memory: 512Mi}}}}\n"
        for queue in ("training", "batch")
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    files = {"trainform.yaml": CONFIG, "platform/pools.yaml": PLATFORM}
    for name in ("alpha", "beta", "gamma"):
        files[f"platform/{name}.yaml"] = project(name)
        files[f"teams/{name}.yaml"] = team(name)
    write_tree(root, files)
    applied = run_cli("apply", str(root), "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    return root


def test_emptying_one_project_is_refused_naming_the_project_guard(folder: Path) -> None:
    (folder / "teams" / "beta.yaml").unlink()

    refused = run_cli("plan", str(folder))

    assert refused.returncode == 1
    assert "project guard" in refused.stderr
    assert "every resource of project beta" in refused.stderr
    assert "Quota/beta/beta-batch" in refused.stderr
    assert "--allow-mass-delete" in refused.stderr
    allowed = run_cli("plan", str(folder), "--allow-mass-delete", "--detailed-exitcode")
    assert allowed.returncode == 2
    assert "2 to delete" in allowed.stdout


def test_deleting_the_project_with_its_resources_is_deliberate(folder: Path) -> None:
    (folder / "teams" / "beta.yaml").unlink()
    (folder / "platform" / "beta.yaml").unlink()

    plan = run_cli("plan", str(folder), "--detailed-exitcode")

    assert plan.returncode == 2, plan.stderr
    assert "3 to delete" in plan.stdout


def test_deleting_part_of_a_project_needs_no_flag(folder: Path) -> None:
    write_tree(folder, {"teams/beta.yaml": team("beta").split("---\n")[0]})
    assert run_cli("plan", str(folder), "--detailed-exitcode").returncode == 2


def test_emptying_a_provider_instance_is_refused(folder: Path) -> None:
    for path in [*(folder / "teams").iterdir(), *(folder / "platform").iterdir()]:
        path.unlink()
    write_tree(folder, {"platform/keep.yaml": "# nothing declared\n"})

    refused = run_cli("plan", str(folder))

    assert refused.returncode == 1
    assert "provider guard" in refused.stderr
    assert "provider instance local" in refused.stderr
