"""Refresh: ask each provider instance, in batches, what exists of the resources at hand.

A failed observe is an error for the whole run: it is never read as "missing", so nothing
is ever planned for creation or deletion because a provider could not be reached.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trainform.planner.errors import PlannerError
from trainform.planner.session import ProviderSet
from trainform.providers.base import Observation, ObserveRequest
from trainform.providers.errors import ProviderError

BATCH_SIZE = 500


class RefreshError(PlannerError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            "cannot refresh: " + "; ".join(problems) + ". Nothing was planned from a failed "
            "read; fix access or rerun with --no-refresh to plan against state alone"
        )


@dataclass(frozen=True)
class Target:
    provider: str
    request: ObserveRequest


def observe_all(
    providers: ProviderSet, targets: Iterable[Target]
) -> dict[tuple[str, str], Observation]:
    """Observations keyed by (address, provider instance)."""
    by_provider: dict[str, list[ObserveRequest]] = {}
    for target in targets:
        by_provider.setdefault(target.provider, []).append(target.request)
    observations: dict[tuple[str, str], Observation] = {}
    problems = []
    for name in sorted(by_provider):
        requests = by_provider[name]
        try:
            provider = providers.get(name)
            for start in range(0, len(requests), BATCH_SIZE):
                batch = requests[start : start + BATCH_SIZE]
                seen = provider.observe(batch)
                for request in batch:
                    if request.address not in seen:
                        raise ProviderError(f"no observation returned for {request.address}")
                    observations[(request.address, name)] = seen[request.address]
        except ProviderError as exc:
            problems.append(f"provider `{name}`: {exc}")
        except Exception as exc:  # noqa: BLE001 - a provider bug must not become "missing"
            problems.append(f"provider `{name}` failed: {type(exc).__name__}: {exc}")
    if problems:
        raise RefreshError(problems)
    return observations
