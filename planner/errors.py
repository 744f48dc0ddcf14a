"""Errors of the engine.

PlannerError                 root of everything `planner` raises
+-- GraphError               the resource graph cannot be built
    +-- DependencyCycleError     references form a cycle (addresses in order)
    +-- MissingReferenceError    a dependency names an address that is not in the graph
+-- AcknowledgementError     drift acknowledgements cannot be read (planner.drift_acknowledgements)
"""

from __future__ import annotations


class PlannerError(Exception):
    """Root of every error raised by the `planner` package."""


class GraphError(PlannerError):
    """The resource graph cannot be built."""


class DependencyCycleError(GraphError):
    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        super().__init__(
            "cannot order resources: reference cycle "
            + " -> ".join(addresses)
            + "; break the cycle by removing one of these references"
        )


class MissingReferenceError(GraphError):
    def __init__(self, source: str, target: str) -> None:
        self.source = source
        self.target = target
        super().__init__(f"cannot build graph: {source} depends on {target}, which is not declared")
