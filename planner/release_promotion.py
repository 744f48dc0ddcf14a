"""Promotion: a ModelRelease with `spec.promoteFrom` copies another release's artifact.

The promoted release is the source release's published artifact, the same digest, under
another repository and/or tag of the same registry instance (staging's repository to
production's, a `candidate` tag to a `production` one). Nothing is rebuilt and no gate is
judged again: the section is the source's, as state recorded it when it was published,
with a `promotedFrom` entry naming the source (address, version, repository, tag, digest).
The artifact manifest is built with the source's address and version, so its bytes and
digest are the source's; the registry provider copies its blobs and manifest by digest
(providers/oci/releases.py, via providers/oci/promotion.py) and verifies the digest.

Refused at `spec.promoteFrom` (file:line by the caller): a source not published yet (not in
state, or changing in this same plan), a source without a registry artifact, a source on
another registry instance; at `spec.version`: a version other than the source's.

Once promoted, the recorded section is kept: a later change of the source (another run
under the same version) does not move the promoted tag; promoting again is a change in Git
(a new promotion, or removing and re-adding this one).
"""

from __future__ import annotations

from typing import Any

from trainform.planner.desired import DesiredItem
from trainform.planner.state import ResourceState
from trainform.providers.oci.release_manifest import release_manifest


class PromotionRefusal(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def promotion_section(
    item: DesiredItem,
    recorded: dict[str, ResourceState],
    desired: dict[str, DesiredItem],
) -> tuple[dict[str, Any], list[str]]:
    """The `release` section of a promotion and the lines the plan shows for it."""
    spec = item.document["spec"]
    source = next(a for f, a, _ in item.references if f == "spec.promoteFrom")
    mine = recorded.get(item.address)
    kept = ((mine.spec if mine else None) or {}).get("release") or {}
    if (kept.get("promotedFrom") or {}).get("address") == source:
        return kept, [
            f"promotion of {source}: digest {kept['digest']}, pinned in state when first "
            "promoted (a later change of the source does not move it)"
        ]
    state = recorded.get(source)
    section = ((state.spec if state else None) or {}).get("release")
    if state is None or not section:
        raise PromotionRefusal(
            "spec.promoteFrom", f"{source} is not published yet: apply it first (--target {source})"
        )
    planned = desired.get(source)
    if planned is None or planned.document["spec"] != state.spec.get("spec"):
        raise PromotionRefusal(
            "spec.promoteFrom",
            f"{source} {'is being removed' if planned is None else 'changes in this plan'}: "
            "promote what is published, after that change is applied",
        )
    origin = (section.get("promotedFrom") or {}).get("address") or source
    section = {key: value for key, value in section.items() if key != "promotedFrom"}
    published = _registry_outputs(state)
    if published is None:
        raise PromotionRefusal(
            "spec.promoteFrom", f"{source} has no registry artifact to promote (objectStore only)"
        )
    instance, outputs = published
    if instance not in item.providers:
        raise PromotionRefusal(
            "spec.promoteFrom",
            f"{source} is on registry instance {instance}, this release on "
            f"{', '.join(item.providers)}: a promotion copies within one registry instance",
        )
    version = str(state.spec["spec"]["version"])
    if str(spec["version"]) != version:
        raise PromotionRefusal(
            "spec.version",
            f"a promotion keeps its source's version {version}, not {spec['version']}",
        )
    base_address = str(section.get("artifactAddress") or source)
    manifest = release_manifest(base_address, version, _without_digest(section))
    if manifest.digest != section["digest"]:
        raise PromotionRefusal(
            "spec.promoteFrom",
            f"{source}'s recorded artifact rebuilds as {manifest.digest}, not the published "
            f"{section['digest']}: apply {source} again before promoting it",
        )
    promoted = {
        **_without_digest(section),
        "artifactAddress": base_address,
        "promotedFrom": {
            "address": source,
            "repository": outputs.get("repository"),
            "tag": outputs.get("tag"),
            "reference": outputs.get("reference"),
            "digest": section["digest"],
        },
        "digest": section["digest"],
    }
    registry = spec["registry"]
    notes = [
        f"promotion of {source} (from {origin}'s run {section['runId']}): copies "
        f"{outputs.get('reference')} to {registry['repository']}:"
        f"{registry.get('tag') or version}, same digest {section['digest']}, no rebuild",
        f"relies on the gates of {source}, judged when it was released: "
        + "; ".join(f"{e['suite']} {e['verdict']}" for e in section.get("evaluations", [])),
    ]
    return promoted, notes


def _without_digest(section: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in section.items() if key != "digest"}


def _registry_outputs(state: ResourceState) -> tuple[str, dict[str, Any]] | None:
    for instance, values in state.outputs.items():
        if isinstance(values, dict) and values.get("repository") and values.get("digest"):
            return instance, values
    return None
