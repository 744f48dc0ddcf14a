"""The partitions file read and written as Slurm's parser (src/common/parse_config.c) reads
it: trailing comments, `\\` continuations, escapes, keys without case, DEFAULT lines, and
the `# trainform: ignore` marker; then, on the real cluster, a hand-written file with all of
them imported, drifted, applied and re-created with every other byte kept."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trainform.providers.errors import PermanentProviderError
from trainform.providers.slurm.conf_syntax import group_lines
from trainform.providers.slurm.partitions import (
    Block,
    edit_line,
    parse_file,
    parse_settings,
    render_file,
)

from tests.engine.support import run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "PartitionName=a MaxTime=60 # was MaxTime=30",
            {"PartitionName": "a", "MaxTime": "60"},
            id="trailing-comment",
        ),
        pytest.param(
            "PartitionName=a Nodes=n\\#1 MaxTime=5",
            {"PartitionName": "a", "Nodes": "n#1", "MaxTime": "5"},
            id="escaped-hash",
        ),
        pytest.param(
            "PartitionName=a \\\n  Hidden=YES \\\n  AllowAccounts=x,y  # who",
            {"PartitionName": "a", "Hidden": "YES", "AllowAccounts": "x,y"},
            id="continuation",
        ),
        pytest.param(
            "PartitionName=a MaxTime=5 # note \\\nHidden=YES",
            {"PartitionName": "a", "MaxTime": "5"},
            id="a-comment-never-continues",
        ),
        pytest.param(
            "PartitionName=a Nodes=n\\\\\nHidden=YES",
            {"PartitionName": "a", "Nodes": "n\\"},
            id="even-backslashes-do-not-continue",
        ),
        pytest.param(
            "partitionname=a maxtime = 5 PRIORITYTIER=2 MaxTime=7",
            {"PartitionName": "a", "MaxTime": "7", "PriorityTier": "2"},
            id="keys-without-case-later-wins",
        ),
        pytest.param(
            'PartitionName=a TRESBillingWeights="CPU=1.0,Mem=0.25G"',
            {"PartitionName": "a", "TRESBillingWeights": "CPU=1.0,Mem=0.25G"},
            id="quoted",
        ),
    ],
)
def test_settings_are_read_as_slurm_reads_them(text: str, expected: dict[str, str]) -> None:
    assert parse_file(text + "\n").partitions() == {"a": expected}


def test_defaults_apply_to_later_lines_and_ignored_partitions_are_invisible() -> None:
    text = (
        "PartitionName=DEFAULT MaxTime=30 State=DRAIN\n"
        "# kept by hand\n# Trainform: Ignore\nPartitionName=hands Nodes=n\n\n"
        "PartitionName=b Nodes=n MaxTime=60\n"
    )
    managed = parse_file(text)
    assert managed.partitions() == {
        "b": {"PartitionName": "b", "Nodes": "n", "MaxTime": "60", "State": "DRAIN"}
    }
    assert managed.partition_line("hands") is None
    with pytest.raises(PermanentProviderError, match="trainform: ignore"):
        managed.put(Block("trainform", "Queue/hands", "PartitionName=hands Nodes=n"))
    managed.remove_partition("hands")
    assert render_file(managed) == text


def test_edits_land_before_comments_and_on_the_line_a_setting_is_on() -> None:
    text = "PartitionName=a Nodes=n \\\n  Hidden=YES PriorityTier=1 \\\n  MaxTime=5  # note"
    edited = edit_line(text, {"PriorityTier": "3", "MaxTime": None, "QOS": "q"})
    assert edited == "PartitionName=a Nodes=n \\\n  Hidden=YES PriorityTier=3 \\\n  QOS=q # note"
    assert parse_settings(edited) == {
        "PartitionName": "a",
        "Nodes": "n",
        "Hidden": "YES",
        "PriorityTier": "3",
        "QOS": "q",
    }
    assert (
        edit_line("PartitionName=a\\\n# c", {"MaxTime": "5"}) == "PartitionName=a\\\n MaxTime=5 # c"
    )


LINE = st.lists(
    st.sampled_from(["MaxTime=60", "Hidden=YES", "PriorityTier=2", "# c", " ", "\\", "QOS=q"]),
    max_size=6,
)


@given(st.lists(LINE, min_size=1, max_size=3), st.sampled_from(["MaxTime", "QOS", "DenyQos"]))
def test_an_edit_changes_what_slurm_reads_of_that_setting_only(
    parts: list[list[str]], key: str
) -> None:
    joined = "PartitionName=a " + " \\\n".join(" ".join(line) for line in parts)
    text = "\n".join(group_lines(joined.split("\n"))[0])  # one entry, as the file holds it
    before = parse_settings(text)
    try:
        edited = edit_line(text, {key: "9"})
    except PermanentProviderError:
        return  # a setting split across a continuation is refused, not guessed
    after = parse_settings(edited)
    assert after.get(key) == "9"
    assert {k: v for k, v in after.items() if k != key} == {
        k: v for k, v in before.items() if k != key
    }


@dataclass
class Site:
    prefix: str
    root: Path
    cluster: SlurmCluster
    original: str


def tf(site: Site, *args: str) -> tuple[int, str]:
    result = run_trainform(*args, cwd=site.root, timeout=180)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


def lines(cluster: SlurmCluster, p: str) -> str:
    node = cluster.node_name
    return (
        f"PartitionName={p}-a Nodes={node} MaxTime=60 PriorityTier=2  # was MaxTime=30\n"
        f"# GPU partition of the b team\n"
        f"PartitionName={p}-b Nodes={node} State=UP \\\n"
        f"    AllowAccounts=root,{p}-acct Hidden=YES ExclusiveUser=NO \\\n"
        f"    DefCpuPerGPU=1 TRESBillingWeights=CPU=1.0 PriorityTier=3  # billing\n"
        f"partitionname={p}-c nodes={node} state=DRAIN\n"
        f"# trainform: ignore\n"
        f"PartitionName={p}-skip Nodes={node} MaxTime=10\n"
    )


def targets(site: Site) -> list[str]:
    """This test's queues (and their pools): `import --from` adopts the whole cluster,
    other modules' objects included, which are theirs to plan."""
    return [f"--target=Queue/{site.prefix}-{suffix}" for suffix in ("a", "b", "c")]


def assert_empty_plan(site: Site) -> None:
    code, output = tf(site, "plan", ".", "--detailed-exitcode", *targets(site))
    assert code == 0, output


def edit_file(site: Site, old: str, new: str) -> None:
    path = site.cluster.partitions_file
    text = path.read_text()
    assert text.count(old) == 1, (old, text)
    path.write_text(text.replace(old, new))
    result = site.cluster.run(["scontrol", "reconfigure"])
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def site(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    p = fixtures.unique_prefix("s")
    root = tmp_path_factory.mktemp("slurm-syntax") / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        fixtures.config(slurm_cluster, slurm_cluster.job_root / p, local=False)
    )
    original = slurm_cluster.partitions_file.read_text()
    try:
        added = slurm_cluster.run(["sacctmgr", "-i", "add", "account", f"{p}-acct"])
        assert added.returncode == 0, added.stderr
        slurm_cluster.partitions_file.write_text(original + lines(slurm_cluster, p))
        result = slurm_cluster.run(["scontrol", "reconfigure"])
        assert result.returncode == 0, result.stderr
        yield Site(p, root, slurm_cluster, original)
    finally:
        slurm_cluster.partitions_file.write_text(original)
        slurm_cluster.run(["scontrol", "reconfigure"])
        fixtures.cleanup(slurm_cluster, p)


@pytest.mark.slow
def test_a_hand_written_file_is_imported_drifted_applied_and_recreated_as_slurm_reads_it(
    site: Site,
) -> None:
    p, path = site.prefix, site.cluster.partitions_file
    written = path.read_text()
    shown = site.cluster.run(["scontrol", "show", "partition", f"{p}-a"]).stdout
    assert "MaxTime=01:00:00" in shown  # what Slurm enforces: the comment is no setting

    code, output = tf(site, "import", "--from", "hpc", ".")
    assert code == 0, output
    generated = (site.root / "imported" / "hpc.yaml").read_text()
    assert f"{p}-skip" not in generated  # marked `# trainform: ignore`
    assert "maxRuntime: 1h" in generated
    assert "State: DRAIN" in generated  # no stopPolicy says DRAIN: stated verbatim
    assert f"AllowAccounts: root,{p}-acct" in generated and "PriorityTier: '3'" in generated
    assert_empty_plan(site)

    edit_file(site, "MaxTime=60 PriorityTier=2", "MaxTime=90 PriorityTier=2")
    edit_file(site, f"AllowAccounts=root,{p}-acct", "AllowAccounts=root")
    edit_file(
        site,
        f"{p}-b Nodes={site.cluster.node_name} State=UP",
        f"{p}-b Nodes={site.cluster.node_name} State=DRAIN",
    )
    edit_file(
        site,
        f"{p}-skip Nodes={site.cluster.node_name} MaxTime=10",
        f"{p}-skip Nodes={site.cluster.node_name} MaxTime=20",
    )
    code, output = tf(site, "drift", ".")
    assert code == 2, output
    changed = [x.strip() for x in output.splitlines() if x.strip().startswith("~ ")]
    assert any(x.startswith("~ spec.maxRuntime: applied 1h, live 1h30m") for x in changed), output
    assert any(
        x.startswith(f"~ spec.slurm.partition.AllowAccounts: applied root,{p}-acct, live root")
        for x in changed
    ), output
    assert f"partition {p}-b State=DRAIN" in output
    assert f"{p}-skip" not in output

    code, output = tf(site, "apply", ".", "--auto-approve", *targets(site))
    assert code == 0, output
    assert path.read_text() == written.replace("MaxTime=10", "MaxTime=20")
    assert_empty_plan(site)

    # a setting gone from a continued line comes back on the last line, before its comment
    edit_file(site, " PriorityTier=3  # billing", "  # billing")
    code, output = tf(site, "apply", ".", "--auto-approve", *targets(site))
    assert code == 0, output
    assert "TRESBillingWeights=CPU=1.0 PriorityTier=3  # billing\n" in path.read_text()

    # a hand-deleted adopted line is written back
    a_line = next(x for x in path.read_text().splitlines() if x.startswith(f"PartitionName={p}-a"))
    edit_file(site, a_line + "\n", "")
    code, output = tf(site, "apply", ".", "--auto-approve", *targets(site))
    assert code == 0 and f"Queue/{p}-a" in output, output
    shown = site.cluster.run(["scontrol", "show", "partition", f"{p}-a"]).stdout
    assert "MaxTime=01:00:00" in shown and "PriorityTier=2" in shown, shown
    assert_empty_plan(site)
    assert f"PartitionName={p}-skip Nodes={site.cluster.node_name} MaxTime=20\n" in path.read_text()
