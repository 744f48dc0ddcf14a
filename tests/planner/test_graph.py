"""The resource graph: edges run dependency -> dependent; creation order is topological."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from trainform.cli.render.graph import GRAPH_RENDERERS
from trainform.planner.errors import DependencyCycleError, GraphError, MissingReferenceError
from trainform.planner.graph import build_graph, creation_order, graph_as_data
from trainform.specs import Dependency, Location, Resource, RootConfig, SpecSet, load_specs
from trainform.specs.models.base import Reference
from trainform.specs.models.kinds import DOCUMENT_ADAPTER

from tests.helpers import REPO


def image(name: str, promoted_from: str | None = None) -> Resource:
    spec: dict[str, object] = {"reference": f"registry.example.com/ml/{name}:v1"}
    if promoted_from:
        spec["promotedFrom"] = promoted_from
    document = DOCUMENT_ADAPTER.validate_python(
        {"apiVersion": "trainform/v1", "kind": "Image", "metadata": {"name": name}, "spec": spec}
    )
    return Resource(f"Image/{name}", document, Location("images.yaml", 1, 1), 0)


def spec_set(*resources: Resource, link: bool = True) -> SpecSet:
    """A SpecSet whose dependencies are the resources' own references (by global address)."""
    by_address = {resource.address: resource for resource in resources}
    if link:
        for resource in resources:
            for reference in resource.document.spec_references():
                address = f"{reference.kind}/{reference.name}"
                resource.dependencies.append(Dependency(address=address, reference=reference))
    return SpecSet(
        Path("."), RootConfig(api_version="trainform/v1"), None, by_address, ["images.yaml"]
    )


@pytest.fixture(scope="module")
def quickstart_graph() -> nx.DiGraph:
    return build_graph(load_specs(REPO / "examples" / "quickstart"))


def test_edges_run_from_dependency_to_dependent() -> None:
    graph = build_graph(spec_set(image("base"), image("tuned", promoted_from="base")))
    assert list(graph.edges) == [("Image/base", "Image/tuned")]
    assert graph.edges["Image/base", "Image/tuned"]["fields"] == ["spec.promotedFrom"]


def test_nodes_carry_kind_name_project_and_location() -> None:
    graph = build_graph(spec_set(image("base")))
    assert graph.nodes["Image/base"] == {
        "kind": "Image",
        "name": "base",
        "project": None,
        "location": "images.yaml:1:1",
    }


def test_creation_order_is_topological(quickstart_graph: nx.DiGraph) -> None:
    order = creation_order(quickstart_graph)
    position = {address: stage for stage, generation in enumerate(order) for address in generation}
    assert set(position) == set(quickstart_graph.nodes)
    for dependency, dependent in quickstart_graph.edges:
        assert position[dependency] < position[dependent], (dependency, dependent)
    assert all(generation == sorted(generation) for generation in order)


def test_quickstart_job_depends_on_what_it_references(quickstart_graph: nx.DiGraph) -> None:
    needs = set(quickstart_graph.predecessors("TrainingJob/research/bigram"))
    assert needs == {
        "Project/research",
        "Queue/default-queue",
        "Image/host-python",
        "Dataset/tiny-corpus",
        "EvalSuite/research/heldout-perplexity",
    }
    assert creation_order(quickstart_graph)[-1] == [
        "Quota/research/research-default",
        "TrainingJob/research/bigram",
    ]


def test_chain_is_created_in_reference_order() -> None:
    graph = build_graph(
        spec_set(image("c", promoted_from="b"), image("b", promoted_from="a"), image("a"))
    )
    assert creation_order(graph) == [["Image/a"], ["Image/b"], ["Image/c"]]


def test_cycle_raises_dependency_cycle_error_in_reference_order() -> None:
    resources = spec_set(
        image("a", promoted_from="b"), image("b", promoted_from="c"), image("c", promoted_from="a")
    )
    with pytest.raises(DependencyCycleError) as info:
        build_graph(resources)
    addresses = info.value.addresses
    assert addresses[0] == addresses[-1]
    assert sorted(addresses[:-1]) == ["Image/a", "Image/b", "Image/c"]
    refers_to = {"Image/a": "Image/b", "Image/b": "Image/c", "Image/c": "Image/a"}
    for referrer, referred in zip(addresses, addresses[1:], strict=False):
        assert refers_to[referrer] == referred
    assert "reference cycle" in str(info.value)
    assert isinstance(info.value, GraphError)


def test_self_reference_is_a_cycle() -> None:
    with pytest.raises(DependencyCycleError) as info:
        build_graph(spec_set(image("a", promoted_from="a")))
    assert info.value.addresses == ["Image/a", "Image/a"]


def test_dependency_on_an_unknown_address_raises_missing_reference_error() -> None:
    orphan = image("tuned", promoted_from="base")
    with pytest.raises(MissingReferenceError) as info:
        build_graph(spec_set(orphan))
    assert (info.value.source, info.value.target) == ("Image/tuned", "Image/base")


def test_two_references_to_the_same_resource_are_one_edge_with_both_fields() -> None:
    base, tuned = image("base"), image("tuned")
    for path in (("spec", "promotedFrom"), ("spec", "other")):
        reference = Reference("Image", "base", path)
        tuned.dependencies.append(Dependency(address="Image/base", reference=reference))
    graph = build_graph(spec_set(base, tuned, link=False))
    assert graph.number_of_edges() == 1
    assert graph.edges["Image/base", "Image/tuned"]["fields"] == [
        "spec.promotedFrom",
        "spec.other",
    ]


def test_graph_data_is_sorted_and_json_serialisable(quickstart_graph: nx.DiGraph) -> None:
    data = graph_as_data(quickstart_graph)
    assert [node["address"] for node in data["nodes"]] == sorted(quickstart_graph.nodes)
    assert [(e["from"], e["to"]) for e in data["edges"]] == sorted(quickstart_graph.edges)
    assert data["order"] == creation_order(quickstart_graph)
    json.dumps(data)


@pytest.mark.parametrize("output_format", sorted(GRAPH_RENDERERS))
def test_every_renderer_names_every_resource(
    quickstart_graph: nx.DiGraph, output_format: str
) -> None:
    text = GRAPH_RENDERERS[output_format](quickstart_graph)
    assert text.endswith("\n")
    for address in quickstart_graph.nodes:
        assert address in text
