"""Injected failures, for tests of a client's retries and error handling.

`KubeAPI.fail(...)` queues a `Fault`: the next matching requests (method, path prefix),
after letting `after` of them through, are answered with the Status the real server sends
for that code (429 TooManyRequests with Retry-After, 500 InternalError, 503
ServiceUnavailable, 504 Timeout, or any other code) instead of being served. With
`applied=True` the request is carried out first and only its answer is replaced: the
"write happened but the response was lost" case. `delay` sleeps before answering.

`reason` and `message` replace the Status of the code, for the 5xx answers a real server
gives that no retry cures: `webhook_unreachable` is the answer to a write that an admission
webhook with failurePolicy Fail would have checked when the API server cannot call it
(apiserver webhook/errors.go ErrCallingWebhook, wrapped by the dispatcher in
apierrors.NewInternalError: message "Internal error occurred: <err>", the error again as
the one cause).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tests.services.kube_api.errors import ApiError

_REASONS = {
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "Timeout: request did not complete within the allotted timeout"),
}


INTERNAL = "Internal error occurred: "


def webhook_unreachable(webhook: str, path: str) -> str:
    """The message of a write refused because the webhook `webhook` (served at `path` by
    Kueue's webhook service) could not be called."""
    return (
        f'{INTERNAL}failed calling webhook "{webhook}": failed to call webhook: Post '
        f'"https://kueue-webhook-service.kueue-system.svc:443{path}?timeout=10s": '
        "dial tcp 10.96.0.20:443: connect: connection refused"
    )


@dataclass
class Fault:
    """One queued failure."""

    code: int
    times: int
    method: str | None = None
    path_prefix: str = ""
    after: int = 0
    retry_after: int | None = None
    applied: bool = False
    delay: float = 0.0
    reason: str | None = None
    message: str | None = None

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and path.startswith(self.path_prefix)

    def error(self) -> tuple[ApiError, dict[str, str]]:
        reason, message = _REASONS.get(self.code, ("InternalError", f"injected {self.code}"))
        reason, message = self.reason or reason, self.message or message
        details: dict[str, Any] | None = None
        if self.retry_after:
            details = {"retryAfterSeconds": self.retry_after}
        elif reason == "InternalError" and message.startswith(INTERNAL):
            details = {"causes": [{"message": message[len(INTERNAL) :]}]}
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after else {}
        return ApiError(self.code, reason, message, details), headers


class Faults:
    """The queue of faults, consumed in order by matching requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[Fault] = []

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._queue.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()

    def take(self, method: str, path: str) -> Fault | None:
        """The fault this request triggers, if any (counting it against the fault)."""
        with self._lock:
            for fault in self._queue:
                if not fault.matches(method, path):
                    continue
                if fault.after > 0:
                    fault.after -= 1
                    return None
                fault.times -= 1
                if fault.times <= 0:
                    self._queue.remove(fault)
                return fault
            return None
