"""What the Slurm provider's reads, writes and imports work with: one configured instance.

SlurmProvider (providers/slurm/provider.py) is the one implementation; observing.py,
writes.py and importing.py are its callees and see it only through `SlurmInstance`, so
none of them imports the provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from trainform.providers.base import Observation, ObserveRequest
    from trainform.providers.slurm.accounting import Accounting
    from trainform.providers.slurm.commands import SlurmCommands
    from trainform.providers.slurm.jobs import SlurmJobs
    from trainform.providers.slurm.nodes import Nodes
    from trainform.providers.slurm.partitions import PartitionFile
    from trainform.providers.slurm.records import SuiteRecords


class SlurmInstance(Protocol):
    """The instance's name and manager, its Slurm interfaces, and the reads it batches."""

    name: str
    manager: str
    job_root: str
    sacctmgr: Accounting
    commands: SlurmCommands
    partitions: PartitionFile
    nodes: Nodes

    @property
    def jobs(self) -> SlurmJobs: ...

    @property
    def suites(self) -> SuiteRecords: ...

    def mark(self, address: str) -> str: ...

    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]: ...
