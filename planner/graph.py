"""The resource graph: a networkx DiGraph with an edge from each dependency to its dependent.

Edges point the way creation runs: `u -> v` means u must exist before v. Creates and
updates follow `nx.topological_generations`; deletes run the generations in reverse.
Built by small named steps so each can be tested alone.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
from trainform.planner.errors import DependencyCycleError, MissingReferenceError
from trainform.specs import Resource, SpecSet


def add_resources(graph: nx.DiGraph, resources: dict[str, Resource]) -> None:
    for address, resource in resources.items():
        graph.add_node(
            address,
            kind=resource.kind,
            name=resource.name,
            project=resource.project,
            location=str(resource.location),
        )


def add_reference_edges(graph: nx.DiGraph, resources: dict[str, Resource]) -> None:
    for address, resource in resources.items():
        for dependency in resource.dependencies:
            if dependency.address not in graph:
                raise MissingReferenceError(address, dependency.address)
            fields = graph.get_edge_data(dependency.address, address, {}).get("fields", [])
            field = ".".join(str(step) for step in dependency.reference.path)
            graph.add_edge(dependency.address, address, fields=[*fields, field])


def check_acyclic(graph: nx.DiGraph) -> None:
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return
    addresses = [edge[0] for edge in cycle] + [cycle[0][0]]
    raise DependencyCycleError(list(reversed(addresses)))


def build_graph(specs: SpecSet) -> nx.DiGraph:
    """The dependency graph of a loaded spec set; raises GraphError subclasses."""
    graph = nx.DiGraph()
    add_resources(graph, specs.resources)
    add_reference_edges(graph, specs.resources)
    check_acyclic(graph)
    return graph


def creation_order(graph: nx.DiGraph) -> list[list[str]]:
    """Generations of addresses; each generation depends only on earlier ones. Sorted."""
    return [sorted(generation) for generation in nx.topological_generations(graph)]


def graph_as_data(graph: nx.DiGraph) -> dict[str, Any]:
    return {
        "nodes": [
            {"address": node, **{k: v for k, v in data.items()}}
            for node, data in sorted(graph.nodes(data=True))
        ],
        "edges": [
            {"from": u, "to": v, "fields": data.get("fields", [])}
            for u, v, data in sorted(graph.edges(data=True))
        ],
        "order": creation_order(graph),
    }
