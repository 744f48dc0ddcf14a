"""docs/slurm.md's table of Slurm settings matches what the provider manages and keeps."""

from __future__ import annotations

from pathlib import Path

from trainform.providers.slurm.accounting import ASSOCIATION_COLUMNS, QOS_COLUMNS
from trainform.providers.slurm.partitions import PARTITION_KEYS as KNOWN_PARTITION_KEYS
from trainform.specs.models.slurm import (
    ASSOCIATION_KEYS,
    PARTITION_KEPT_KEYS,
    PARTITION_KEYS,
    QOS_KEYS,
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "slurm.md"


def table() -> dict[tuple[str, str], set[str]]:
    """(object, status) -> the settings the table lists."""
    text = DOC.read_text()
    rows = text.split("<!-- mapping-table: start -->")[1].split("<!-- mapping-table: end -->")[0]
    found: dict[tuple[str, str], set[str]] = {}
    for line in rows.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        names = {name.strip().strip("`") for name in cells[0].split(",")}
        found.setdefault((cells[1], cells[2]), set()).update(names)
    return found


def test_every_partition_setting_is_listed_as_managed_or_kept() -> None:
    listed = table()
    assert listed[("partition", "managed")] == {*PARTITION_KEYS, "Nodes", "State"}
    assert listed[("partition", "kept")] == set(PARTITION_KEPT_KEYS)
    assert set(KNOWN_PARTITION_KEYS) == {"PartitionName", "Nodes", "State"} | set(
        PARTITION_KEYS
    ) | set(PARTITION_KEPT_KEYS)


def test_every_qos_and_association_setting_read_is_listed_as_managed() -> None:
    listed = table()
    assert listed[("QOS", "managed")] == {*QOS_KEYS, "Priority"}
    assert set(QOS_COLUMNS.values()) == listed[("QOS", "managed")]
    assert listed[("association", "managed")] == set(ASSOCIATION_KEYS)
    assert set(ASSOCIATION_COLUMNS.values()) == set(ASSOCIATION_KEYS)
    assert listed[("account", "managed")] == {
        "Description",
        "Organization",
        "Parent",
        "user associations",
    }


def test_nothing_is_both_managed_and_kept() -> None:
    listed = table()
    for kind in ("partition", "QOS", "association"):
        assert not listed.get((kind, "managed"), set()) & listed.get((kind, "kept"), set())
