"""Rendering the resource graph as text, Graphviz dot, Mermaid or JSON."""

from __future__ import annotations

import json

import networkx as nx
from trainform.cli.render.words import plural
from trainform.planner.graph import creation_order, graph_as_data


def render_graph_text(graph: nx.DiGraph) -> str:
    lines = []
    for number, generation in enumerate(creation_order(graph), start=1):
        lines.append(f"stage {number}:")
        for address in generation:
            needs = sorted(graph.predecessors(address))
            suffix = f"  <- {', '.join(needs)}" if needs else ""
            lines.append(f"  {address}{suffix}")
    nodes, edges = graph.number_of_nodes(), graph.number_of_edges()
    lines.append(f"{plural(nodes, 'resource')}, {plural(edges, 'dependency', 'dependencies')}")
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_graph_dot(graph: nx.DiGraph) -> str:
    lines = ["digraph trainform {", "  rankdir=LR;", "  node [shape=box];"]
    for node, data in sorted(graph.nodes(data=True)):
        lines.append(f"  {_quote(node)} [label={_quote(node)}, group={_quote(data['kind'])}];")
    for source, target in sorted(graph.edges()):
        lines.append(f"  {_quote(source)} -> {_quote(target)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_graph_mermaid(graph: nx.DiGraph) -> str:
    ids = {node: f"n{index}" for index, node in enumerate(sorted(graph.nodes))}
    lines = ["flowchart LR"]
    for node, ident in ids.items():
        lines.append(f'  {ident}["{node}"]')
    for source, target in sorted(graph.edges()):
        lines.append(f"  {ids[source]} --> {ids[target]}")
    return "\n".join(lines) + "\n"


def render_graph_json(graph: nx.DiGraph) -> str:
    return json.dumps({"formatVersion": 1, **graph_as_data(graph)}, indent=2) + "\n"


GRAPH_RENDERERS = {
    "text": render_graph_text,
    "dot": render_graph_dot,
    "mermaid": render_graph_mermaid,
    "json": render_graph_json,
}
