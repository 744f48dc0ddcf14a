"""The floor for `trainform plan --no-refresh`: the least work a planner of these specs does.

The issue's "minimal Python pipeline": read the same files, parse them with yaml_rs,
validate each document against plain pydantic models (bench/floor_validate.py's), build a
networkx graph from the references, diff every document against the state as plain dicts,
order the changes topologically, print a summary. No templating, positions, normalization,
providers or rendering of the changes.

    python bench/floor_plan.py DIR [STATE.json]
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import networkx as nx
from floor_validate import DOCUMENT, load_documents, spec_files

REFERENCE_FIELDS = ("queue", "image", "promotedFrom")
REFERENCE_LISTS = ("readers", "datasets")


def references(document: dict[str, Any]) -> list[str]:
    spec = document.get("spec", {})
    found = [spec[f] for f in REFERENCE_FIELDS if isinstance(spec.get(f), str)]
    for field in REFERENCE_LISTS:
        found += [str(v).split("@")[0] for v in spec.get(field, []) if isinstance(v, str)]
    found += [p["pool"] for p in spec.get("pools", []) if isinstance(p, dict) and "pool" in p]
    project = document.get("metadata", {}).get("project")
    return found + ([project] if project else [])


def main(argv: list[str]) -> int:
    root = os.path.normpath(argv[0])
    state: dict[str, Any] = {}
    if len(argv) > 1 and os.path.exists(argv[1]):
        with open(argv[1], encoding="utf-8") as handle:
            state = json.load(handle).get("resources", {})
    graph = nx.DiGraph()
    documents: dict[str, dict[str, Any]] = {}
    by_name: dict[str, str] = {}
    for path in spec_files(root):
        with open(path, encoding="utf-8") as handle:
            for document in load_documents(handle.read()):
                DOCUMENT.validate_python(document)
                metadata = document["metadata"]
                address = "/".join(
                    part
                    for part in (document["kind"], metadata.get("project"), metadata["name"])
                    if part
                )
                documents[address] = document
                by_name.setdefault(metadata["name"], address)
                graph.add_node(address)
    for address, document in documents.items():
        for name in references(document):
            if name in by_name:
                graph.add_edge(by_name[name], address)
    create = update = 0
    for address in nx.topological_sort(graph):
        recorded = state.get(address)
        if recorded is None:
            create += 1
        elif recorded.get("spec", {}).get("spec") != documents[address].get("spec"):
            update += 1
    print(f"Plan: {create} to create, {update} to update, 0 to replace, 0 to delete.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
