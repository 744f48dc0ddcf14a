"""Adopting a hand-built Slurm site changes nothing, and hand edits are seen and undone.

The site is built as an administrator would, with sacctmgr and a partitions file (never
with trainform): three accounts (one the child of another), users, two QOS with GrpTRES,
MaxWall, Priority, Preempt and PreemptMode, limits on an account and on user associations
of account/partition pairs, and two partition lines with MaxTime, PriorityTier, QOS,
AllowAccounts and settings trainform does not manage (MaxNodes, Default, AllowQos,
GraceTime, DenyAccounts). `import --from`, `plan --detailed-exitcode` and `apply` leave
`sacctmgr dump`, the QOS table, `scontrol show partition` and the file byte for byte as
they were. Then hand edits of every managed field class show in `drift` with both values
and are undone by one `apply`, after which the plan is empty.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.engine.support import run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow


@dataclass
class Site:
    prefix: str
    root: Path
    cluster: SlurmCluster

    def name(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"


def tf(site: Site, *args: str) -> tuple[int, str]:
    """trainform in the site's folder; plan and apply only the site's objects once
    imported (import reads the whole shared cluster, other tests' objects included)."""
    generated = site.root / "imported" / "hpc.yaml"
    if args[0] in ("plan", "apply") and generated.exists():
        args = (*args, *fixtures.own_targets(generated, site.prefix))
    result = run_trainform(*args, cwd=site.root, timeout=180)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


def sacctmgr(cluster: SlurmCluster, *args: str) -> None:
    result = cluster.run(["sacctmgr", "-i", *args])
    assert result.returncode == 0, result.stdout + result.stderr


def reconfigure(cluster: SlurmCluster) -> None:
    result = cluster.run(["scontrol", "reconfigure"])
    assert result.returncode == 0, result.stdout + result.stderr


def build(cluster: SlurmCluster, p: str) -> str:
    """The hand-made site; returns the partition lines appended to the file."""
    sacctmgr(cluster, "add", "account", f"{p}-phys", "Description=physics dept", "Organization=sci")
    sacctmgr(cluster, "add", "account", f"{p}-hep", f"parent={p}-phys", "Description=high energy")
    sacctmgr(cluster, "add", "account", f"{p}-bio", "Description=biology", "Organization=life")
    sacctmgr(cluster, "add", "qos", f"{p}-silver", "Priority=10", "GrpTRES=cpu=8")
    sacctmgr(cluster, "modify", "qos", "where", f"name={p}-silver", "set", "MaxWall=12:00:00")
    sacctmgr(
        cluster,
        "add",
        "qos",
        f"{p}-gold",
        "Description=gold tier",
        "Priority=100",
        "GrpTRES=gres/gpu=4",
        "MaxWall=2-00:00:00",
        "GrpJobs=10",
        "MaxTRESPerUser=gres/gpu=2",
        "PreemptMode=requeue",
        f"Preempt={p}-silver",
    )
    sacctmgr(cluster, "modify", "account", "where", f"name={p}-hep", "set", "GrpTRES=gres/gpu=2")
    sacctmgr(cluster, "modify", "account", "where", f"name={p}-hep", "set", "MaxWall=1-00:00:00")
    sacctmgr(cluster, "add", "user", f"{p}-alice", f"account={p}-hep")
    sacctmgr(cluster, "add", "user", f"{p}-bob", f"account={p}-bio", "MaxSubmitJobs=20")
    for user, account, partition, limits in (
        ("alice", "hep", "gpu", ["GrpTRES=gres/gpu=1", "MaxJobs=2"]),
        ("alice", "bio", "gpu", ["MaxWall=600"]),
        ("bob", "bio", "cpu", ["MaxJobs=3"]),
    ):
        sacctmgr(
            cluster,
            "add",
            "user",
            f"{p}-{user}",
            f"account={p}-{account}",
            f"partition={p}-{partition}",
            *limits,
        )
    node = cluster.node_name
    lines = (
        f"PartitionName={p}-gpu Nodes={node} Default=NO MaxTime=2-00:00:00 PriorityTier=1 "
        f"QOS={p}-gold AllowAccounts={p}-hep,{p}-bio MaxNodes=1 GraceTime=30 State=UP\n"
        f"PartitionName={p}-cpu  Nodes={node} MaxTime=720 PriorityTier=5 QOS={p}-silver "
        f"DenyAccounts={p}-phys AllowQos={p}-silver,normal OverSubscribe=NO\n"
    )
    with cluster.partitions_file.open("a") as handle:
        handle.write(f"# hand-written by the site admin\n{lines}")
    reconfigure(cluster)
    return lines


def snapshot(cluster: SlurmCluster, folder: Path) -> dict[str, str]:
    dump = folder / "dump.cfg"
    dump.unlink(missing_ok=True)
    result = cluster.run(["sacctmgr", "-i", "dump", cluster.cluster_name, f"file={dump}"])
    assert result.returncode == 0, result.stderr
    qos = cluster.run(["sacctmgr", "-nP", "show", "qos", "format=" + QOS_COLUMNS])
    partitions = cluster.run(["scontrol", "show", "partition"])
    return {
        "dump": dump.read_text(),
        "qos": qos.stdout,
        "partitions": partitions.stdout,
        "file": cluster.partitions_file.read_text(),
    }


QOS_COLUMNS = (
    "Name,Description,Priority,GrpTRES,GrpJobs,GrpSubmit,GrpWall,MaxTRES,MaxTRESPU,MaxJobsPU,"
    "MaxSubmitPU,MaxWall,Preempt,PreemptMode,UsageFactor,Flags,GraceTime"
)


@pytest.fixture(scope="module")
def site(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    prefix = fixtures.unique_prefix("h")
    root = tmp_path_factory.mktemp("slurm-site") / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        fixtures.config(slurm_cluster, slurm_cluster.job_root / prefix, local=False)
    )
    original = slurm_cluster.partitions_file.read_text()
    try:
        build(slurm_cluster, prefix)
        yield Site(prefix, root, slurm_cluster)
    finally:  # users first: alice's default account hep cannot go while bio holds her
        slurm_cluster.partitions_file.write_text(original)
        slurm_cluster.run(["scontrol", "reconfigure"])
        fixtures.cleanup(slurm_cluster, prefix)


def test_import_plan_apply_leave_the_site_byte_for_byte(site: Site, tmp_path: Path) -> None:
    before = snapshot(site.cluster, tmp_path)

    code, output = tf(site, "import", "--from", "hpc", ".")
    assert code == 0, output
    assert snapshot(site.cluster, tmp_path) == before

    code, output = tf(site, "plan", ".", "--detailed-exitcode")
    assert code == 0, output
    code, output = tf(site, "apply", ".", "--auto-approve")
    assert code == 0, output

    after = snapshot(site.cluster, tmp_path)
    for key in before:
        assert after[key] == before[key], key
    generated = (site.root / "imported" / "hpc.yaml").read_text()
    assert "withinQueue" not in generated  # nothing invented
    assert "MaxNodes" not in generated  # kept verbatim in the file, not declared


def hand_edit_file(site: Site, old: str, new: str) -> None:
    path = site.cluster.partitions_file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    reconfigure(site.cluster)


EDITS = [
    pytest.param(
        ["modify", "qos", "where", "name={p}-gold", "set", "MaxWall=1-00:00:00"],
        "spec.slurm.qos.MaxWall",
        ("2-00:00:00", "1-00:00:00"),
        "QOS {p}-gold",
        id="qos-limit",
    ),
    pytest.param(
        ["modify", "qos", "where", "name={p}-gold", "set", "Preempt="],
        "spec.slurm.qos.Preempt",
        ("{p}-silver", "''"),
        "QOS {p}-gold",
        id="qos-preempt",
    ),
    pytest.param(
        ["modify", "account", "where", "name={p}-hep", "set", "GrpTRES=gres/gpu=3"],
        "spec.slurm.limits.GrpTRES",
        ("gres/gpu=2", "gres/gpu=3"),
        "association of account {p}-hep",
        id="account-limit",
    ),
    pytest.param(
        [
            "modify",
            "user",
            "where",
            "name={p}-alice",
            "account={p}-hep",
            "partition={p}-gpu",
            "set",
            "MaxJobs=5",
        ],
        "spec.slurm.users.{p}-alice.MaxJobs",
        ("2", "5"),
        "association of user {p}-alice in account {p}-hep on partition {p}-gpu",
        id="user-partition-limit",
    ),
    pytest.param(
        [
            "modify",
            "user",
            "where",
            "name={p}-bob",
            "account={p}-bio",
            "partition=",
            "set",
            "MaxSubmitJobs=30",
        ],
        "spec.slurm.users.{p}-bob.MaxSubmitJobs",
        ("20", "30"),
        "association of user {p}-bob in account {p}-bio",
        id="user-limit",
    ),
    pytest.param(
        ["modify", "qos", "where", "name={p}-silver", "set", "Priority=15"],
        "spec.defaultPriority",
        ("10", "15"),
        "QOS {p}-silver",
        id="qos-priority",
    ),
    pytest.param(
        ("file", "MaxTime=720 ", "MaxTime=600 "),
        "spec.maxRuntime",
        ("12h", "10h"),
        "partition {p}-cpu in ",
        id="partition-max-time",
    ),
    pytest.param(
        ["modify", "account", "where", "name={p}-bio", "set", "parent={p}-phys"],
        "spec.slurm.parent",
        ("root", "{p}-phys"),
        "account {p}-bio",
        id="account-parent",
    ),
    pytest.param(
        ["modify", "account", "where", "name={p}-bio", "set", "Description=renamed"],
        "spec.slurm.description",
        ("biology", "renamed"),
        "account {p}-bio",
        id="account-description",
    ),
    pytest.param(
        ["modify", "account", "where", "name={p}-phys", "set", "Organization=science"],
        "spec.slurm.organization",
        ("sci", "science"),
        "account {p}-phys",
        id="account-organization",
    ),
    pytest.param(
        ("file", "PriorityTier=1 ", "PriorityTier=7 "),
        "spec.slurm.partition.PriorityTier",
        ("1", "7"),
        "partition {p}-gpu in ",
        id="partition-priority-tier",
    ),
    pytest.param(
        ("file", "AllowAccounts={p}-hep,{p}-bio", "AllowAccounts={p}-hep"),
        "spec.slurm.partition.AllowAccounts",
        ("{p}-hep,{p}-bio", "{p}-hep"),
        "partition {p}-gpu in ",
        id="partition-allow-accounts",
    ),
]


def test_hand_edits_of_every_managed_field_class_are_drift_and_apply_undoes_them(
    site: Site, tmp_path: Path
) -> None:
    p = site.prefix
    if not (site.root / "imported" / "hpc.yaml").exists():
        assert tf(site, "import", "--from", "hpc", ".")[0] == 0
    before = snapshot(site.cluster, tmp_path)
    for param in EDITS:
        edit = param.values[0]
        if edit[0] == "file":
            hand_edit_file(site, edit[1].format(p=p), edit[2].format(p=p))
        else:
            sacctmgr(site.cluster, *(part.format(p=p) for part in edit))

    code, output = tf(site, "drift", ".")

    assert code == 2, output
    assert "<object object" not in output
    changed = [  # drift reads every adopted object: other tests' are not this test's
        x.strip() for x in output.splitlines() if x.strip().startswith("~ ") and p in x
    ]
    for param in EDITS:
        _, path, (old, new), where = param.values
        line = f"~ {path.format(p=p)}: applied {old.format(p=p)}, live {new.format(p=p)}"
        assert any(x.startswith(f"{line} ({where.format(p=p)}") for x in changed), (
            param.id,
            output,
        )
    assert len(changed) == len(EDITS), output  # nothing unchanged is named
    code, output = tf(site, "apply", ".", "--auto-approve")
    assert code == 0, output
    code, output = tf(site, "plan", ".", "--detailed-exitcode")
    assert code == 0, output
    after = snapshot(site.cluster, tmp_path)
    assert after["qos"] == before["qos"]
    assert after["file"] == before["file"]
    assert after["partitions"] == before["partitions"]
    assert re.sub(r"\s+", " ", after["dump"]) == re.sub(r"\s+", " ", before["dump"])


SPEC_EDITS = [  # (text in the generated file, replacement, planned address, planned path)
    ("MaxWall: 2-00:00:00", "MaxWall: 3-00:00:00", "Queue/{p}-gpu", "spec.slurm.qos.MaxWall"),
    (
        "PriorityTier: '5'",
        "PriorityTier: '6'",
        "Queue/{p}-cpu",
        "spec.slurm.partition.PriorityTier",
    ),
    ("GrpTRES: gres/gpu=2", "GrpTRES: gres/gpu=3", "Project/{p}-hep", "spec.slurm.limits.GrpTRES"),
    (
        "MaxJobs: '2'",
        "MaxJobs: '4'",
        "Quota/{p}-hep/{p}-hep-{p}-gpu",
        "spec.slurm.users.{p}-alice.MaxJobs",
    ),
    (
        "description: biology",
        "description: life sciences",
        "Project/{p}-bio",
        "spec.slurm.description",
    ),
    (  # a setting no longer declared is cleared, as the plan shows
        "      Preempt: {p}-silver\n",
        "",
        "Queue/{p}-gpu",
        "spec.slurm.qos.Preempt",
    ),
    ("      PriorityTier: '1'\n", "", "Queue/{p}-gpu", "spec.slurm.partition.PriorityTier"),
]
WRAPPER = """#!/bin/sh
tab=$(printf '\\t')
line=""
for argument in "$@"; do line="$line$argument$tab"; done
printf '%s{name}\\n' "$line" >> {log}
exec {real} "$@"
"""  # one append per command: sacctmgr reads run side by side


def recording_bin(folder: Path, log: Path) -> Path:
    """sacctmgr and scontrol that append their argv to `log`, then run the real program."""
    folder.mkdir()
    for name in ("sacctmgr", "scontrol"):
        script = folder / name
        script.write_text(WRAPPER.format(log=log, name=name, real=f"/usr/bin/{name}"))
        script.chmod(0o755)
    return folder


def written(site: Site, log: Path, file_before: str) -> set[tuple[str, str]]:
    """(address, spec path) of every write apply made, read from the commands it ran and
    the partitions file it changed."""
    p = site.prefix
    queue_of_qos = {f"{p}-gold": f"Queue/{p}-gpu", f"{p}-silver": f"Queue/{p}-cpu"}
    found = set()
    reconfigures = 0
    for line in log.read_text().splitlines():
        *argv, program = line.split("\t")
        if program == "scontrol":
            assert argv[0] in ("ping", "reconfigure", "show"), argv
            reconfigures += argv[0] == "reconfigure"
            continue
        if "-i" not in argv:
            assert argv[0].startswith("-n") and argv[1] in ("show", "list"), argv
            continue
        verb, entity, _, *rest = argv[argv.index("-i") + 1 :]
        assert verb == "modify", argv  # nothing added or deleted: no spec asked for it
        where = dict(x.split("=", 1) for x in rest[: rest.index("set")])
        assignments = [x.split("=", 1)[0] for x in rest[rest.index("set") + 1 :]]
        for key in assignments:
            if entity == "qos":
                found.add((queue_of_qos[where["name"]], f"spec.slurm.qos.{key}"))
            elif entity == "account":
                field = {"Description": "description", "Parent": "parent"}.get(key)
                path = f"spec.slurm.{field}" if field else f"spec.slurm.limits.{key}"
                found.add((f"Project/{where['name']}", path))
            else:
                account, partition = where["account"], where["partition"]
                address = f"Quota/{account}/{account}-{partition}"
                found.add((address, f"spec.slurm.users.{where['name']}.{key}"))
    before = {line.split()[0]: line.split() for line in file_before.splitlines() if "=" in line}
    after = site.cluster.partitions_file.read_text()
    changed_lines = 0
    for line in after.splitlines():
        if "=" not in line or line.startswith("#"):
            continue
        old = before[line.split()[0]]
        if old != line.split():
            changed_lines += 1
            name = line.split()[0].split("=", 1)[1]
            for token in set(line.split()) ^ set(old):
                found.add((f"Queue/{name}", f"spec.slurm.partition.{token.split('=')[0]}"))
    assert reconfigures == changed_lines  # one write, one reconfigure, per queue changed
    return found


def test_apply_runs_exactly_the_writes_the_plan_shows(site: Site, tmp_path: Path) -> None:
    p = site.prefix
    if not (site.root / "imported" / "hpc.yaml").exists():
        assert tf(site, "import", "--from", "hpc", ".")[0] == 0
    generated = site.root / "imported" / "hpc.yaml"
    text = generated.read_text()
    for old, new, _, _ in SPEC_EDITS:
        assert text.count(old.format(p=p)) == 1, old
        text = text.replace(old.format(p=p), new.format(p=p))
    generated.write_text(text)
    log = tmp_path / "commands.log"
    config = site.root / "trainform.yaml"
    config.write_text(
        config.read_text().replace(
            f"binDir: {site.cluster.bin_dir}", f"binDir: {recording_bin(tmp_path / 'bin', log)}"
        )
    )
    code, output = tf(site, "plan", ".", "--format", "json")
    planned = {
        (change["address"], field["path"])
        for change in json.loads(output)["changes"]
        for field in change["changes"]
    }
    expected = {(address.format(p=p), path.format(p=p)) for _, _, address, path in SPEC_EDITS}
    assert planned == expected
    file_before = site.cluster.partitions_file.read_text()
    log.write_text("")

    code, output = tf(site, "apply", ".", "--auto-approve")

    assert code == 0, output
    assert written(site, log, file_before) == planned
    assert "DefMemPerGPU" not in site.cluster.partitions_file.read_text()
    code, output = tf(site, "plan", ".", "--detailed-exitcode")
    assert code == 0, output


def test_an_adopted_partition_naming_a_missing_qos_is_refused_before_any_write(
    site: Site, tmp_path: Path
) -> None:
    p = site.prefix
    if not (site.root / "imported" / "hpc.yaml").exists():
        assert tf(site, "import", "--from", "hpc", ".")[0] == 0
    generated = site.root / "imported" / "hpc.yaml"
    text = generated.read_text()
    generated.write_text(text.replace(f"QOS: {p}-silver", f"QOS: {p}-nosuch"))
    before = snapshot(site.cluster, tmp_path)
    try:
        code, output = tf(site, "apply", ".", "--auto-approve")
        assert code == 1, output
        assert f"Slurm has no QOS {p}-nosuch" in output, output
        assert snapshot(site.cluster, tmp_path) == before
        assert "is UP" in site.cluster.run(["scontrol", "ping"]).stdout
    finally:
        generated.write_text(text)


def test_a_site_that_breaks_a_policy_is_adopted_with_a_waiver_suggestion(
    site: Site, tmp_path: Path
) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    config = (site.root / "trainform.yaml").read_text()
    (root / "trainform.yaml").write_text(
        config + "policies:\n  path: .policies\n  settings:\n    priority-bounds: {max: 50}\n"
    )
    (root / ".policies").mkdir()
    other = Site(site.prefix, root, site.cluster)
    before = snapshot(site.cluster, tmp_path)

    code, output = tf(other, "import", "--from", "hpc", ".")

    assert code == 0, output
    suggestion = output[output.index("waivers:") :]
    assert f"address: Queue/{site.prefix}-gpu" in suggestion and "priority-bounds" in suggestion
    code, output = tf(other, "plan", ".", "--detailed-exitcode")
    assert code == 3, output  # the policy still holds until someone signs the waiver
    (root / ".policies" / "policies.yaml").write_text(
        "apiVersion: trainform/v1\nkind: PolicyConfig\n" + suggestion
    )
    code, output = tf(other, "plan", ".", "--detailed-exitcode")
    assert code == 0, output
    assert snapshot(site.cluster, tmp_path) == before
