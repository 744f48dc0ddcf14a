"""import_resource: adopt a live object into state under an address declared in the specs."""

from __future__ import annotations

from trainform.planner.desired import build_desired
from trainform.planner.errors import PlannerError
from trainform.planner.normalize import spec_hash
from trainform.planner.state import ResourceState, State
from trainform.planner.workspace import Workspace
from trainform.providers.base import ObserveRequest


def import_resource(
    workspace: Workspace, address: str, identifier: str, only: str | None = None
) -> ResourceState:
    """Adopt `identifier` as `address`; with `only`, from that provider instance alone."""
    desired = build_desired(workspace.specs)
    item = desired.get(address)
    if item is None:
        raise PlannerError(
            f"cannot import {address}: declare it in the specs first, then import the live object"
        )
    state = workspace.backend.read() or State.new()
    if address in state.resources:
        raise PlannerError(f"cannot import {address}: it is already in state")
    outputs: dict[str, dict] = {}
    live = None
    for name in item.providers:
        if only is not None and name != only:
            continue
        provider = workspace.providers.get(name)
        request = ObserveRequest(address, item.kind, item.name, item.project, item.document)
        observation = provider.adopt(request, identifier)
        if not observation.exists:
            raise PlannerError(
                f"cannot import {address}: provider `{name}` has no object {identifier}; "
                f"an ID on a {provider.type} provider is {provider.import_ids}"
            )
        outputs[name] = observation.outputs
        live = live or observation.live
    document = live or {}
    resource = ResourceState(
        address=address,
        kind=item.kind,
        providers=item.providers,
        spec=document,
        spec_hash=spec_hash(document),
        outputs=outputs,
        dependencies=item.dependencies,
    )
    workspace.backend.record(
        state, {"type": "outcome", "address": address, "resource": resource.to_json()}
    )
    workspace.backend.compact(state)
    return resource
