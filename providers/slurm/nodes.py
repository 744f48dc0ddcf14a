"""Nodes as Slurm reports them, and what a ResourcePool's nodes add up to.

Read-only: `scontrol show node --oneliner` (CPUs, RealMemory, Gres, features, state) and
`scontrol show hostnames` to expand hostlists. Nodes are never created or changed: a pool
is a selection of existing nodes (by hostlist or feature), and its declared capacity is
compared with what Slurm reports. Called by SlurmProvider for pools, partition checks and
import (`group_pools` groups nodes with identical CPUs, memory, GRES and features).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.names import check_feature, check_hostlist, check_node_name

_SETTING = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/]*)=")


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    memory_mib: int
    gres: str
    features: tuple[str, ...]
    state: str

    def gpus(self) -> tuple[str, int]:
        """(type, count) of the node's `gpu` GRES; type "" when untyped."""
        kind, total = "", 0
        for item in filter(None, self.gres.split(",")):
            item = item.split("(")[0]
            parts = item.split(":")
            if parts[0] != "gpu":
                continue
            if len(parts) == 3:
                kind, total = parts[1], total + int(parts[2])
            elif len(parts) == 2 and parts[1].isdigit():
                total += int(parts[1])
            elif len(parts) == 2:
                kind, total = parts[1], total + 1
        return kind, total

    @property
    def flavor(self) -> tuple[int, int, str, tuple[str, ...]]:
        return (self.cpus, self.memory_mib, self.gres, self.features)


def parse_oneliner(line: str) -> dict[str, str]:
    """`Key=Value Key=Value with spaces ...` -> dict (values run to the next `Key=`)."""
    matches = list(_SETTING.finditer(line))
    settings = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        settings[match.group(1)] = line[match.end() : end].strip()
    return settings


def parse_nodes(text: str) -> dict[str, Node]:
    nodes = {}
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        s = parse_oneliner(line)
        features = s.get("AvailableFeatures", "")
        nodes[s["NodeName"]] = Node(
            name=s["NodeName"],
            cpus=int(s.get("CPUTot", "0") or 0),
            memory_mib=int(s.get("RealMemory", "0") or 0),
            gres="" if s.get("Gres", "(null)") == "(null)" else s.get("Gres", ""),
            features=tuple(sorted(f for f in features.split(",") if f and f != "(null)")),
            state=s.get("State", ""),
        )
    return nodes


class Nodes:
    def __init__(self, commands: SlurmCommands) -> None:
        self.commands = commands
        self._expanded: dict[str, list[str]] = {}

    def all(self) -> dict[str, Node]:
        text = self.commands.run(["scontrol", "show", "node", "--oneliner"]).stdout
        return parse_nodes(text)

    def expand(self, hostlist: str) -> list[str]:
        """`node[1-3]` -> [node1, node2, node3] (Slurm's own expansion, offline)."""
        if hostlist not in self._expanded:
            check_hostlist(hostlist)
            text = self.commands.run(["scontrol", "show", "hostnames", hostlist]).stdout
            self._expanded[hostlist] = [n for n in text.split() if n]
        return list(self._expanded[hostlist])

    def compress(self, names: list[str]) -> str:
        if not names:
            return ""
        listed = ",".join(sorted(check_node_name(name) for name in names))
        return self.commands.run(["scontrol", "show", "hostlist", listed]).stdout.strip()

    def select(self, node_list: str, features: list[str], known: dict[str, Node]) -> list[str]:
        """Names of the pool's nodes: its hostlist, else every node with all its features."""
        if node_list:
            return self.expand(node_list)
        wanted = {check_feature(f) for f in features}
        return sorted(n.name for n in known.values() if wanted and wanted <= set(n.features))


def group_pools(nodes: dict[str, Node]) -> list[list[Node]]:
    """Nodes with identical CPUs, memory, GRES and features, one group each, by first name."""
    groups: dict[tuple[int, int, str, tuple[str, ...]], list[Node]] = {}
    for node in sorted(nodes.values(), key=lambda n: n.name):
        groups.setdefault(node.flavor, []).append(node)
    return sorted(groups.values(), key=lambda group: group[0].name)
