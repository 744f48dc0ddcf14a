"""Refresh: ask each provider instance, in batches, what exists of the resources at hand.

A failed observe is an error for the whole run: it is never read as "missing", so nothing
is ever planned for creation or deletion because a provider could not be reached.

Provider instances are observed in parallel, each in a thread of its own, and each is
given `RefreshSettings.timeout` seconds per batch (`--timeout`): one that has not answered
by then is reported as not answering, so an unreachable platform costs seconds, not a
client's own minute of retries. The error has one line per provider, each naming what to
check for that provider's type.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from trainform.planner.errors import PlannerError
from trainform.planner.session import ProviderSet
from trainform.providers.base import Observation, ObserveRequest
from trainform.providers.errors import ProviderError

BATCH_SIZE = 500


MAX_PROBLEM_CHARS = 400

WHAT_TO_CHECK = {
    "kubernetes": "check the kubeconfig context (connection.context) and that the API server "
    "answers",
    "slurm": "check connection.conf and binDir on this machine, and that slurmctld and "
    "slurmdbd answer",
    "objectstore": "check connection.endpointUrl and the credentials (profile or AWS_* variables)",
    "registry": "check connection.url and the credential variables it names",
    "local": "check connection.root",
}


class RefreshSettings:
    timeout: float = 10.0
    """Seconds each provider instance has to answer one batch of reads (`--timeout`); set
    for the whole process by the CLI, as StateBackend.lock_timeout."""


class RefreshError(PlannerError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            f"cannot refresh: {len(problems)} of the providers failed to answer. Nothing was "
            "planned from a failed read; fix access, or rerun with --no-refresh to plan "
            "against state alone.\n  " + "\n  ".join(problems)
        )


def one_line(text: str) -> str:
    """A provider's message on one line, bounded (sacctmgr and friends print several)."""
    line = " / ".join(part.strip() for part in text.splitlines() if part.strip())
    return line if len(line) <= MAX_PROBLEM_CHARS else line[: MAX_PROBLEM_CHARS - 1] + "…"


def _problem(providers: ProviderSet, name: str, cause: str) -> str:
    instance = providers.config.provider(name)
    kind = instance.type if instance is not None else ""
    check = WHAT_TO_CHECK.get(kind)
    return (
        f"provider `{name}`"
        + (f" ({kind})" if kind else "")
        + f": {one_line(cause)}"
        + (f"; {check}" if check else "")
    )


@dataclass(frozen=True)
class Target:
    provider: str
    request: ObserveRequest


def _observe_one(
    providers: ProviderSet, name: str, requests: list[ObserveRequest]
) -> dict[str, Observation]:
    provider = providers.get(name)
    found: dict[str, Observation] = {}
    for start in range(0, len(requests), BATCH_SIZE):
        batch = requests[start : start + BATCH_SIZE]
        seen = provider.observe(batch)
        for request in batch:
            if request.address not in seen:
                raise ProviderError(f"no observation returned for {request.address}")
            found[request.address] = seen[request.address]
    return found


class _Observer(threading.Thread):
    """One provider instance's observe, in a daemon thread: one that never answers cannot
    keep the command from ending."""

    def __init__(self, providers: ProviderSet, name: str, requests: list[ObserveRequest]):
        super().__init__(name=f"observe-{name}", daemon=True)
        self.providers, self.instance, self.requests = providers, name, requests
        self.found: dict[str, Observation] | None = None
        self.problem: str | None = None

    def run(self) -> None:
        try:
            self.found = _observe_one(self.providers, self.instance, self.requests)
        except ProviderError as exc:
            self.problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - a provider bug must not become "missing"
            self.problem = f"failed: {type(exc).__name__}: {exc}"


def observe_all(
    providers: ProviderSet, targets: Iterable[Target]
) -> dict[tuple[str, str], Observation]:
    """Observations keyed by (address, provider instance)."""
    import time

    by_provider: dict[str, list[ObserveRequest]] = {}
    for target in targets:
        by_provider.setdefault(target.provider, []).append(target.request)
    observers = [_Observer(providers, name, by_provider[name]) for name in sorted(by_provider)]
    for observer in observers:
        observer.start()
    started = time.monotonic()
    observations: dict[tuple[str, str], Observation] = {}
    problems = []
    for observer in observers:
        batches = -(-len(observer.requests) // BATCH_SIZE)
        allowed = RefreshSettings.timeout * max(batches, 1)
        observer.join(max(0.0, started + allowed - time.monotonic()))
        if observer.is_alive():
            cause = f"did not answer within {allowed:g}s (--timeout)"
            problems.append(_problem(providers, observer.instance, cause))
        elif observer.problem is not None:
            problems.append(_problem(providers, observer.instance, observer.problem))
        else:
            found = observer.found or {}
            observations.update(
                {(address, observer.instance): seen for address, seen in found.items()}
            )
    if problems:
        raise RefreshError(problems)
    return observations
