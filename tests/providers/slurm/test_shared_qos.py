"""A QOS shared by two partitions, association QOS lists and inherited limits, on a
hand-built site of the real Slurm 22.05 test cluster.

The site, built with sacctmgr and a partitions file as an administrator would: QOS `train`
named by partitions `long` and `short`; account `acme` with an own MaxWall that its child
account `kid` inherits; user alice with a QOS list on her association without partition
(it names `train`) and on each partition (on `short` also a DefaultQOS). Then, through the
CLI: import declares the QOS once (`long` declares it, `short` takes it with qosFrom) and
pins nothing inherited on `kid`; plan, apply and plan are empty; a hand-deleted association
comes back with its QOS list and default, and a user added to the adopted Quota gets the
queue's QOS, with an empty plan after; deleting `short` keeps the QOS (the plan says why)
and slurmctld survives a reconfigure; the plan of deleting `long` too keeps the QOS
because alice's association still names it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.engine.support import run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow


def tf(root: Path, *args: str) -> tuple[int, str]:
    result = run_trainform(*args, cwd=root, timeout=180)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


def ok(cluster: SlurmCluster, *argv: str) -> str:
    result = cluster.run(list(argv))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def association(cluster: SlurmCluster, user: str, account: str, partition: str) -> list[str]:
    """[QOS list sorted, DefaultQOS] of one association, as Slurm enforces them."""
    text = ok(cluster, "sacctmgr", "-nP", "show", "association", "where", f"user={user}",
              f"account={account}", "format=Partition,QOS,DefaultQOS")  # fmt: skip
    for line in text.splitlines():
        found, qos, default = line.split("|")
        if found == partition:
            return [",".join(sorted(qos.split(","))), default]
    return []


@pytest.fixture(scope="module")
def site(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    p = fixtures.unique_prefix("q")
    cluster = slurm_cluster
    original = cluster.partitions_file.read_text()
    try:
        yield from _build_site(cluster, p)
    finally:
        cluster.partitions_file.write_text(original)
        cluster.run(["scontrol", "reconfigure"])
        fixtures.cleanup(cluster, p)


def _build_site(cluster: SlurmCluster, p: str) -> Iterator[str]:
    node = cluster.node_name
    for argv in (
        ["add", "qos", f"{p}-train", "Priority=20", "GrpTRES=gres/gpu=4"],
        ["add", "account", f"{p}-acme", "Description=acme", "Organization=ml"],
        ["modify", "account", "where", f"name={p}-acme", "set", "MaxWall=100"],
        ["add", "account", f"{p}-kid", f"parent={p}-acme", "Description=kid"],
        ["add", "user", f"{p}-alice", f"account={p}-acme", f"QOS=normal,{p}-train"],
        ["add", "user", f"{p}-alice", f"account={p}-acme", f"partition={p}-short",
         f"QOS=normal,{p}-train", f"DefaultQOS={p}-train"],
        ["add", "user", f"{p}-alice", f"account={p}-acme", f"partition={p}-long",
         f"QOS=normal,{p}-train"],
    ):  # fmt: skip
        ok(cluster, "sacctmgr", "-i", *argv)
    with cluster.partitions_file.open("a") as handle:
        handle.write(
            f"PartitionName={p}-long Nodes={node} QOS={p}-train MaxTime=60\n"
            f"PartitionName={p}-short Nodes={node} QOS={p}-train MaxTime=30\n"
        )
    ok(cluster, "scontrol", "reconfigure")
    yield p


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def plan_reasons(root: Path, address: str, targets: list[str]) -> list[str]:
    code, output = tf(root, "plan", ".", "--format", "json", *targets)
    assert code == 0, output
    change = next(c for c in json.loads(output)["changes"] if c["address"] == address)
    assert change["action"] == "delete", change
    return list(change["reasons"])


def test_a_shared_qos_is_declared_once_and_outlives_the_queues_deleted(
    site: str, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    p, cluster = site, slurm_cluster
    root = tmp_path / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        fixtures.config(cluster, cluster.job_root / p, local=False)
    )
    assert tf(root, "import", "--from", "hpc", ".")[0] == 0
    generated = root / "imported" / "hpc.yaml"
    targets = fixtures.own_targets(generated, p)  # other tests' objects are theirs to plan
    docs = documents(generated)
    long, short = named(docs, "Queue", f"{p}-long"), named(docs, "Queue", f"{p}-short")
    assert long["spec"]["slurm"]["qos"]["GrpTRES"] == "gres/gpu=4"
    assert long["spec"]["slurm"]["qos"]["MaxTRESPerUser"] == ""  # unset: watched
    assert short["spec"]["slurm"] == {"partition": {"QOS": f"{p}-train"}, "qosFrom": f"{p}-long"}
    kid = named(docs, "Project", f"{p}-kid")["spec"]["slurm"]
    assert kid["limits"]["MaxWall"] == ""  # inherited from acme, never pinned on kid
    quota = named(docs, "Quota", f"{p}-acme-{p}-short")["spec"]["slurm"]["users"]
    assert quota[f"{p}-alice"] == {"DefaultQOS": f"{p}-train", "QOS": f"normal,{p}-train"}

    assert tf(root, "plan", ".", "--detailed-exitcode", *targets)[0] == 0
    assert tf(root, "apply", ".", "--auto-approve", *targets)[0] == 0
    code, output = tf(root, "plan", ".", "--detailed-exitcode", *targets)
    assert code == 0, output

    # a hand-deleted association, settings unset at import set by hand, and a user added
    # to the adopted Quota
    ok(cluster, "sacctmgr", "-i", "delete", "user", "where", f"name={p}-alice",
       f"account={p}-acme", f"partition={p}-short")  # fmt: skip
    ok(cluster, "sacctmgr", "-i", "modify", "qos", "where", f"name={p}-train", "set",
       "MaxTRESPerUser=gres/gpu=1")  # fmt: skip
    ok(cluster, "sacctmgr", "-i", "modify", "account", "where", f"name={p}-kid", "set", "GrpJobs=3")
    quota[f"{p}-bob"] = {}
    generated.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    code, output = tf(root, "apply", ".", "--auto-approve", *targets)
    assert code == 0, output
    alice = association(cluster, f"{p}-alice", f"{p}-acme", f"{p}-short")
    assert alice == [f"normal,{p}-train", f"{p}-train"]
    assert f"{p}-train" in association(cluster, f"{p}-bob", f"{p}-acme", f"{p}-short")[0]
    qos = ok(cluster, "sacctmgr", "-nP", "show", "qos", f"{p}-train", "format=MaxTRESPU")
    assert qos.strip() == ""
    kid_rows = ok(cluster, "sacctmgr", "-nP", "show", "association", "where",
                  f"account={p}-kid", "format=User,GrpJobs,MaxWall").splitlines()  # fmt: skip
    assert kid_rows == ["||01:40:00"]  # GrpJobs cleared, MaxWall still inherited from acme
    code, output = tf(root, "plan", ".", "--detailed-exitcode", *targets)
    assert code == 0, output

    # deleting one of the two queues keeps the QOS, and slurmctld takes the new file
    docs = [d for d in docs if f"{p}-short" not in d["metadata"]["name"]]
    generated.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    reasons = plan_reasons(root, f"Queue/{p}-short", targets)
    assert f"QOS {p}-train stays: Queue/{p}-long declares it" in reasons
    code, output = tf(root, "apply", ".", "--auto-approve", *targets)
    assert code == 0, output
    assert f"{p}-train" in ok(cluster, "sacctmgr", "-nP", "show", "qos", "format=Name").split()
    targets = [t for t in targets if f"{p}-short" not in t]  # gone from specs and state
    ok(cluster, "scontrol", "reconfigure")
    assert "is UP" in ok(cluster, "scontrol", "ping")
    assert cluster.controller_alive()

    # the owner's delete would keep it too: alice's own association names it
    docs = [d for d in docs if f"{p}-long" not in d["metadata"]["name"]]
    generated.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    (reason,) = plan_reasons(root, f"Queue/{p}-long", targets)[-1:]
    assert reason.startswith(f"QOS {p}-train stays: still named by ")
    assert f"association of user {p}-alice in account {p}-acme" in reason
