"""An account with no association on the cluster (made without one, or left behind when
its parent was deleted: the parent's child associations go with it) has no ParentName in
`sacctmgr show account withassoc`; Slurm gives it root, the default Parent, once it is
associated again. Import and observe both read it as root, so the plan right after
`trainform import` is empty; declaring users on it adds the association first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from trainform.providers.base import ObserveRequest
from trainform.providers.slurm.accounting import Account, AccountingSnapshot, parse_associations
from trainform.providers.slurm.instance import SlurmInstance
from trainform.providers.slurm.observing import observe_project

from tests.engine.support import run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

# `sacctmgr -nP show association format=Account,User,Partition,ParentName,...` after
# `delete account phys` removed the association of its child hep (hep's account stays)
ASSOCIATIONS = "root|||\nroot|root||\nbio|||root\nbio|bob||\n"


def snapshot() -> AccountingSnapshot:
    found = AccountingSnapshot()
    for name in ("root", "bio", "hep"):
        found.accounts[name] = Account(name, name, "sci")
    found.associations = parse_associations(ASSOCIATIONS, ASSOCIATIONS)
    return found


def test_an_account_without_an_association_reads_as_a_child_of_root() -> None:
    accounts = snapshot()

    assert accounts.association("hep") is None
    assert accounts.parent_of("hep") == "root"
    assert accounts.parent_of("bio") == "root"
    assert accounts.parent_of("root") == ""  # the top of the tree has no parent


@pytest.mark.parametrize("parent", ["root", "phys"])
def test_observe_reads_the_parent_import_writes(parent: str) -> None:
    document: dict[str, Any] = {
        "kind": "Project",
        "metadata": {"name": "hep"},
        "spec": {"owners": ["sci"], "users": [], "slurm": {"parent": parent}},
    }
    request = ObserveRequest("Project/hep", "Project", "hep", None, document, {"adopted": True})

    # adopted: ownership is state's record, the provider instance is never consulted
    observation = observe_project(cast(SlurmInstance, None), request, snapshot())

    assert observation.exists
    assert observation.live["spec"]["slurm"]["parent"] == "root"


def tf(root: Path, *args: str) -> tuple[int, str]:
    result = run_trainform(*args, cwd=root, timeout=180)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


@pytest.fixture
def orphan(slurm_cluster: SlurmCluster) -> Iterator[str]:
    p = fixtures.unique_prefix("o")
    try:
        for argv in (
            ["add", "account", f"{p}-dept", "Description=dept"],
            ["add", "account", f"{p}-team", f"parent={p}-dept", "Description=team"],
            ["delete", "account", "where", f"name={p}-dept"],  # takes team's association
        ):
            result = slurm_cluster.run(["sacctmgr", "-i", *argv])
            assert result.returncode == 0, result.stdout + result.stderr
        yield p
    finally:
        fixtures.cleanup(slurm_cluster, p)


def test_the_plan_after_importing_an_account_without_an_association_is_empty(
    slurm_cluster: SlurmCluster, orphan: str, tmp_path: Path
) -> None:
    p, cluster = orphan, slurm_cluster
    shown = cluster.run(
        ["sacctmgr", "-nP", "show", "account", f"{p}-team", "withassoc",
         "format=Account,Cluster,ParentName"]
    )  # fmt: skip
    assert shown.stdout.split() == [f"{p}-team||"], shown.stdout
    root = tmp_path / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(fixtures.config(cluster, cluster.job_root / p, False))
    target = f"--target=Project/{p}-team"  # other modules' objects are theirs to plan

    assert tf(root, "import", "--from", "hpc", ".")[0] == 0

    generated = root / "imported" / "hpc.yaml"
    docs = [d for d in yaml.safe_load_all(generated.read_text()) if d]
    team = next(d for d in docs if d["metadata"]["name"] == f"{p}-team")
    assert team["spec"]["slurm"]["parent"] == "root" and team["spec"]["users"] == []
    code, output = tf(root, "plan", ".", "--detailed-exitcode", target)
    assert code == 0, output

    team["spec"]["users"] = ["root"]  # users live on associations: apply adds one first
    generated.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    code, output = tf(root, "apply", ".", "--auto-approve", target)
    assert code == 0, output
    shown = cluster.run(
        ["sacctmgr", "-nP", "show", "association", f"account={p}-team",
         "format=Account,User,ParentName"]
    )  # fmt: skip
    assert sorted(shown.stdout.split()) == [f"{p}-team|root|", f"{p}-team||root"], shown.stdout
    code, output = tf(root, "plan", ".", "--detailed-exitcode", target)
    assert code == 0, output
