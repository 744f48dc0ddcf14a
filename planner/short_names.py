"""Short names wherever an address is taken: `bigram`, `research/bigram` or
`TrainingJob/bigram` for `TrainingJob/research/bigram`, as status, logs and lineage take
them. `full_addresses` gives each name's one address among those known (the specs' and
the state's); a name that fits several is an error listing them, one that fits none is
kept as given (the caller's own "no such resource" names it). Called by planner.plan for
--target and --replace."""

from __future__ import annotations

from collections.abc import Iterable

from trainform.planner.errors import PlannerError


class AmbiguousAddressError(PlannerError):
    """A short name that fits several addresses."""


def matching_addresses(known: Iterable[str], name: str) -> list[str]:
    """The addresses `name` may mean: itself if known, else every address whose last
    segments are `name`, or whose kind and name are (`Kind/name` for `Kind/project/name`)."""
    addresses = set(known)
    if name in addresses:
        return [name]
    found = set()
    for address in addresses:
        kind, _, rest = address.partition("/")
        if address.endswith("/" + name) or f"{kind}/{rest.rsplit('/', 1)[-1]}" == name:
            found.add(address)
    return sorted(found)


def full_addresses(known: Iterable[str], names: Iterable[str], option: str) -> tuple[str, ...]:
    """Each of `names` as the one full address it means."""
    addresses = set(known)
    resolved = []
    for name in names:
        matches = matching_addresses(addresses, name)
        if len(matches) > 1:
            raise AmbiguousAddressError(
                f"{option} {name} is ambiguous: it names {', '.join(matches)}; give one of them"
            )
        resolved.append(matches[0] if matches else name)
    return tuple(resolved)
