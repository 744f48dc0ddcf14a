"""What a ResourcePool's nodes add up to, as Slurm reports them.

`pool_facts` selects the pool's nodes (hostlist or features) among the nodes `scontrol
show node` lists and sums up one node's capacity (CPUs, memory, GPUs via GRES). Nodes the
pool names that Slurm does not know, and nodes that differ from each other, become
findings; the per-node figures are the smallest among the pool's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainform.providers.base import Finding
from trainform.providers.slurm.nodes import Node, Nodes


@dataclass
class PoolFacts:
    names: list[str]
    missing: list[str]
    cpus: int = 0
    memory_mib: int = 0
    gpus: int = 0
    gpu_type: str = ""
    mixed: bool = False
    nodes: list[Node] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": len(self.nodes),
            "cpusPerNode": self.cpus,
            "memoryMiB": self.memory_mib,
            "gpusPerNode": self.gpus,
            "gpuType": self.gpu_type,
        }

    def outputs(self, nodes: Nodes) -> dict[str, Any]:
        return {
            "nodeList": nodes.compress([n.name for n in self.nodes]),
            "cpusPerNode": self.cpus,
            "memoryMiB": self.memory_mib,
            "gpusPerNode": self.gpus,
        }

    def findings(self) -> tuple[Finding, ...]:
        found = []
        if self.missing:
            found.append(
                Finding(
                    "nodes-missing",
                    f"Slurm knows no node named {', '.join(self.missing)}",
                    {"nodes": self.missing},
                )
            )
        if self.mixed:
            found.append(
                Finding(
                    "nodes-mixed",
                    "the pool's nodes differ in CPUs, memory or GRES; the smallest is shown",
                    {"nodes": [n.name for n in self.nodes]},
                )
            )
        return tuple(found)


def pool_facts(nodes: Nodes, spec: dict[str, Any], known: dict[str, Node]) -> PoolFacts:
    names = nodes.select(spec.get("nodeList", ""), spec.get("features", []), known)
    present = [known[n] for n in names if n in known]
    facts = PoolFacts(names=names, missing=[n for n in names if n not in known], nodes=present)
    if not present:
        return facts
    facts.cpus = min(n.cpus for n in present)
    facts.memory_mib = min(n.memory_mib for n in present)
    facts.gpus = min(n.gpus()[1] for n in present)
    facts.gpu_type = present[0].gpus()[0]
    facts.mixed = len({(n.cpus, n.memory_mib, n.gres) for n in present}) > 1
    return facts
