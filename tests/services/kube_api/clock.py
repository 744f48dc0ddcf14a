"""Time passing on the fake API server, without sleeping: `elapse(api, seconds)`.

The controllers of a real cluster act on timers: the Job controller fails a Job active
longer than its `activeDeadlineSeconds` (pkg/controller/job/job_controller.go,
pastActiveDeadline), Kueue deactivates a Workload admitted longer than its maximum
execution time (pkg/controller/core/workload_controller.go, reconcileMaxExecutionTime).
A test cannot wait hours for them, and cannot move the server's clock forward either: the
times the server stamps would then lie ahead of the clock of the trainform process under
test (a retry backoff counted from an end in the future never ends).

So time passes the other way round: every time the store holds (creationTimestamp,
condition transitions, startTime, ...: each string field in RFC 3339 form) moves
`seconds` into the past, which is what `seconds` of waiting would have made of them, and
the controllers then reconcile once, as their timers would have woken them. Objects keep
their resourceVersion: nothing about them changed but the distance to now. What users
store (the data of ConfigMaps and Secrets) holds no time the server keeps and stays as it is.
"""

from __future__ import annotations

import datetime
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.services.kube_api.server import KubeAPI

_USER_DATA = {"configmaps", "secrets"}
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def _earlier(text: str, seconds: float) -> str:
    value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    moved = value - datetime.timedelta(seconds=seconds)
    if "." in text:
        return (
            moved.astimezone(datetime.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        )
    return moved.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _shift(value: Any, seconds: float) -> Any:
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = _shift(item, seconds)
        return value
    if isinstance(value, list):
        return [_shift(item, seconds) for item in value]
    if isinstance(value, str) and _TIME.fullmatch(value):
        return _earlier(value, seconds)
    return value


def elapse(api: KubeAPI, seconds: float) -> None:
    """Let `seconds` pass on the server: its recorded times move into the past, then the
    controllers that run (the Kueue stand-in and its Job controller) reconcile."""
    store = api.store
    with store.lock:
        namespaces = {(group, plural, namespace) for group, plural, namespace, _ in store.keys()}
        for group, plural, namespace in namespaces:
            for obj in store.peek(group, plural, namespace):
                _shift(obj["metadata"] if plural in _USER_DATA else obj, seconds)
        if api.kueue.running:
            api.kueue.reconcile()
