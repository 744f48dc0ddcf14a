"""Whose a Slurm object is: an account's or QOS's Description carries the marker of the
manager that created it (providers/slurm/names.py writes and parses it).

`is_ours` decides whether a description is this manager's; `refuse` is the error a write
raises for an object that is not (another manager's, or unmarked: those are adopted with
`trainform import`, never taken over silently).
"""

from __future__ import annotations

from trainform.providers.errors import PermanentProviderError
from trainform.providers.slurm.names import parse_marker


def is_ours(manager: str, description: str) -> bool:
    """True when `description` carries the marker of `manager` (case aside)."""
    found = parse_marker(description)
    return found is not None and found[0].lower() == manager.lower()


def refuse(address: str, description: str) -> PermanentProviderError:
    owner = description or "no trainform marker"
    return PermanentProviderError(
        f"cannot change {address}: the Slurm object is not managed by this trainform "
        f"instance ({owner}); import it with `trainform import` to manage it"
    )
