"""Promoted tags that `trainform import` adopted and trainform has not marked yet.

Import only reads: an existing tag without an ownership marker is recorded in state, its
outputs saying `adopted` and keeping the digest the tag had then. The registry provider's
first write to such a tag, as a plan shows it, passes through here: an update or replace
takes the tag (and writes the marker), a delete untags it, each only while the tag still
points at the adopted digest. A tag moved since is refused: trainform never overwrites or
deletes what it has not marked.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.oci.client import Descriptor, RegistryClient
from trainform.providers.oci.ownership import untag
from trainform.providers.oci.references import ImageTarget


def adopted_digest(outputs: dict[str, Any]) -> str | None:
    """The digest an imported, not yet marked tag had at import (None if not such a tag)."""
    digest = outputs.get("digest") if outputs.get("adopted") else None
    return str(digest) if digest else None


def check_unmarked(
    target: ImageTarget, address: str, recorded: dict[str, Any], current: Descriptor
) -> None:
    """Refuse to overwrite the unmarked tag `current` unless it is the one `address` adopted
    (`recorded`: its outputs in state) and still has the digest it had then."""
    adopted = adopted_digest(recorded)
    if adopted is None:
        raise PermanentProviderError(
            f"{target.name()}: the tag exists without trainform's ownership marker; "
            "trainform does not overwrite tags it did not create (promote to a new tag, "
            "or remove this one first)"
        )
    if current.digest != adopted:
        raise PermanentProviderError(
            f"{target.name()}: the tag now points at {current.digest}, not {adopted} as "
            f"when {address} was imported; someone moved it, and trainform does not "
            "overwrite a tag it has not marked (check the tag, then `trainform state rm "
            f"{address}` and import it again)"
        )


def untag_adopted(
    client: RegistryClient, address: str, repository: str, tag: str, adopted: str
) -> None:
    """Delete an imported tag never marked, only while it has the digest seen at import."""
    current = client.head_manifest(repository, tag)
    if current is None:
        return
    if current.digest != adopted:
        raise PermanentProviderError(
            f"cannot delete {client.host}/{repository}:{tag} ({address}): it now points at "
            f"{current.digest}, not {adopted} as when it was imported; trainform never marked "
            "it and does not delete what was pushed since (remove the tag by hand, or "
            f"`trainform state rm {address}` to leave it)"
        )
    untag(client, repository, tag, adopted)
