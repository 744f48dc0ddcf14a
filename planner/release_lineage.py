"""Delivery look-back: from a released artifact to its release, run, data, code and gates.

`find_release` finds the ModelRelease in state that published a target given as a registry
reference (`host/repository:tag`, `...@sha256:...`), a bare artifact digest, or an
object-store URI (the version's prefix, its record, or a file under it). `release_lineage`
joins that release (what it published, the gates it relied on when it was planned) with the
lineage of its run (planner/lineage.py: image, data, code, parameters, parent runs,
evaluations). Read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainform.planner.lineage import Lineage, find_lineage
from trainform.planner.state import State
from trainform.planner.workspace import Workspace


@dataclass
class ReleaseLineage:
    address: str
    document: dict[str, Any]
    outputs: dict[str, dict[str, Any]]
    run: Lineage

    def to_json(self) -> dict[str, Any]:
        spec = self.document.get("spec") or {}
        section = self.document.get("release") or {}
        registry = next((o for o in self.outputs.values() if o.get("reference")), None)
        store = next((o for o in self.outputs.values() if o.get("uri")), None)
        return {
            "address": self.address,
            "version": spec.get("version"),
            "digest": section.get("digest"),
            "job": section.get("job"),
            "runId": section.get("runId"),
            "source": section.get("source") or {},
            "files": section.get("files") or [],
            "registry": {k: registry.get(k) for k in ("reference", "repository", "tag")}
            if registry
            else None,
            "objectStore": {k: store.get(k) for k in ("uri", "record")} if store else None,
            "provenance": section.get("provenance") or {},
            "evaluations": section.get("evaluations") or [],
        }


def _names(resource_outputs: dict[str, Any], section: dict[str, Any]) -> set[str]:
    """Every way a target may name this release."""
    names = {str(section.get("digest") or "")}
    for outputs in resource_outputs.values():
        if outputs.get("reference"):
            base = f"{outputs['registry']}/{outputs['repository']}"
            names |= {
                str(outputs["reference"]),
                f"{base}:{outputs['tag']}",
                f"{base}@{outputs['digest']}",
            }
        for key in ("uri", "record"):
            if outputs.get(key):
                names.add(str(outputs[key]).rstrip("/"))
    names.discard("")
    return names


def find_release(state: State, target: str) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """(address, document, outputs) of the release `target` names, or None."""
    wanted = target.strip().rstrip("/")
    for address, resource in sorted(state.resources.items()):
        if resource.kind != "ModelRelease":
            continue
        section = resource.spec.get("release") or {}
        names = _names(resource.outputs, section)
        prefixes = [
            str(o["uri"]) for o in resource.outputs.values() if str(o.get("uri", "")).endswith("/")
        ]
        if wanted in names or address == wanted or any(wanted.startswith(p) for p in prefixes):
            return address, resource.spec, resource.outputs
    return None


def release_summaries(state: State | None) -> list[dict[str, Any]]:
    """One line's worth per release in state, for `status`: address, version, run, digest
    and where it is published."""
    found = []
    for address, resource in sorted((state.resources if state else {}).items()):
        if resource.kind != "ModelRelease":
            continue
        section = resource.spec.get("release") or {}
        places = [
            str(outputs.get("reference") or outputs.get("uri") or "")
            for outputs in resource.outputs.values()
        ]
        found.append(
            {
                "address": address,
                "version": (resource.spec.get("spec") or {}).get("version"),
                "runId": section.get("runId"),
                "digest": section.get("digest"),
                "published": [place for place in places if place],
            }
        )
    return found


def release_lineage(workspace: Workspace, target: str) -> ReleaseLineage | None:
    """The lineage of the release `target` names; None when it names no release."""
    state = workspace.backend.read() or State.new()
    found = find_release(state, target)
    if found is None:
        return None
    address, document, outputs = found
    section = document.get("release") or {}
    run = find_lineage(workspace, str(section.get("job")), str(section.get("runId")))
    return ReleaseLineage(address, document, outputs, run)
