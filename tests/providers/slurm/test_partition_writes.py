"""Writes to the partitions file: in place, one line per partition, and rolled back when
slurmctld refuses the result (against the real controller, which exits on such a file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trainform.providers.errors import PermanentProviderError
from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.partitions import (
    Block,
    ManagedFile,
    PartitionFile,
    edit_line,
    parse_file,
    parse_settings,
    render_file,
)

from tests.services.slurm import SlurmCluster, restart_controller

KEYS = st.sampled_from(["MaxTime", "PriorityTier", "QOS", "AllowAccounts", "MaxNodes", "Hidden"])
VALUES = st.from_regex(r"[A-Za-z0-9,_-]{1,8}", fullmatch=True)
LINES = st.lists(
    st.from_regex(r"[ -~\t]{0,40}", fullmatch=True).filter(lambda line: "\n" not in line),
    max_size=8,
)


@given(LINES, st.booleans())
def test_an_unchanged_file_renders_byte_for_byte(lines: list[str], trailing: bool) -> None:
    text = "\n".join(lines) + ("\n" if trailing and lines else "")
    assert render_file(parse_file(text)) == text


@given(st.dictionaries(KEYS, st.one_of(st.none(), VALUES), max_size=4))
def test_an_edit_changes_the_named_settings_and_nothing_else(
    changes: dict[str, str | None],
) -> None:
    line = "PartitionName=gpu  Nodes=vm[1-4] MaxTime=2-00:00:00 Default=NO GraceTime=30"
    edited = edit_line(line, changes)
    expected = {**parse_settings(line), **{k: v for k, v in changes.items() if v is not None}}
    for key in [k for k, v in changes.items() if v is None]:
        expected.pop(key, None)
    assert parse_settings(edited) == expected
    untouched = [t for t in line.split() if t.split("=")[0] not in changes]
    assert [t for t in edited.split() if t.split("=")[0] not in changes] == untouched


def test_an_edit_keeps_spacing_and_order() -> None:
    line = "PartitionName=cpu  Nodes=vm PriorityTier=5 QOS=silver OverSubscribe=NO"
    assert edit_line(line, {"PriorityTier": "6"}) == line.replace(
        "PriorityTier=5", "PriorityTier=6"
    )


def test_putting_a_partition_replaces_the_line_that_names_it() -> None:
    managed = parse_file("# site\nPartitionName=gpu Nodes=vm MaxNodes=1\n")
    managed.put(Block("trainform", "Queue/gpu", "PartitionName=gpu Nodes=vm"))
    assert list(managed.partitions()) == ["gpu"]
    assert render_file(managed).count("PartitionName=gpu") == 1


def test_a_file_naming_a_partition_twice_is_refused_before_any_write(tmp_path: Path) -> None:
    path = tmp_path / "partitions.conf"
    text = "PartitionName=gpu Nodes=vm\nPartitionName=gpu Nodes=vm MaxTime=5\n"
    path.write_text(text)
    partitions = PartitionFile(path, tmp_path / "slurm.conf", SlurmCommands())

    def edit(managed: ManagedFile) -> None:
        managed.append_line("PartitionName=cpu Nodes=vm")

    with pytest.raises(PermanentProviderError, match="names partition gpu on more than one"):
        partitions.change(edit, lambda managed: [])
    assert path.read_text() == text


def test_a_file_slurmctld_refuses_is_rolled_back_and_a_down_controller_is_reported(
    slurm_cluster: SlurmCluster,
) -> None:
    commands = SlurmCommands(str(slurm_cluster.bin_dir), str(slurm_cluster.conf))
    partitions = PartitionFile(slurm_cluster.partitions_file, slurm_cluster.conf, commands)
    partitions.recovery_wait = 2.0
    before = slurm_cluster.partitions_file.read_text()

    def edit(managed: ManagedFile) -> None:  # Slurm's parser accepts it; slurmctld does not
        managed.put(Block("trainform", "Queue/refused", "PartitionName=refused Nodes=nosuch9"))

    try:
        with pytest.raises(PermanentProviderError) as raised:
            partitions.change(edit, lambda managed: [])  # the node check skipped on purpose
        message = str(raised.value)
        assert "does not answer `scontrol ping`" in message, message
        assert "start slurmctld again" in message and "restored" not in message
        assert slurm_cluster.partitions_file.read_text() == before
        assert not slurm_cluster.controller_alive()
    finally:
        restart_controller(slurm_cluster)
    assert "is UP" in slurm_cluster.run(["scontrol", "ping"]).stdout
