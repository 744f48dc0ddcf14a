"""Watches: `?watch=true` on a list URL streams JSON events until `timeoutSeconds`.

The answer is chunked JSON, one `{"type": ..., "object": ...}` per line, as the real server
sends it. Without `resourceVersion` (or with "0") the watch opens with an ADDED event per
existing object; with `sendInitialEvents=true` it then sends the BOOKMARK that marks the
end of the initial events. With a resourceVersion it replays every later change from the
store's history (history is never compacted, so 410 Gone never happens). Label and field
selectors and the namespace filter every event. An object that stops matching a selector is
simply no longer reported (the real server sends a DELETED for it: a gap).
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from tests.services.kube_api import errors
from tests.services.kube_api.selectors import field_matcher, label_matcher
from tests.services.kube_api.store import Store
from tests.services.kube_api.target import Target, present

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

MAX_SECONDS = 1800.0


class WatchStream:
    """A prepared watch: `run` writes the response and returns when it ends."""

    def __init__(
        self, store: Store, target: Target, query: dict[str, str], stopping: threading.Event
    ) -> None:
        self.store, self.target, self.stopping = store, target, stopping
        self.labels = label_matcher(query.get("labelSelector"))
        self.fields = field_matcher(query.get("fieldSelector"))
        timeout = query.get("timeoutSeconds", "")
        self.seconds = float(timeout) if timeout.isdigit() else MAX_SECONDS
        self.initial_bookmark = query.get("sendInitialEvents") == "true"
        start = query.get("resourceVersion", "")
        if start not in ("", "0") and not start.isdigit():
            raise errors.bad_request(f"invalid resource version: {start}")
        self.start = int(start) if start not in ("", "0") else None

    def _matches(self, obj: dict[str, Any]) -> bool:
        namespace = self.target.namespace
        if namespace is not None and obj["metadata"].get("namespace") != namespace:
            return False
        return self.labels(obj) and self.fields(obj)

    def _line(self, kind: str, obj: dict[str, Any]) -> bytes:
        return (json.dumps({"type": kind, "object": obj}) + "\n").encode()

    def run(self, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache, private")
        handler.end_headers()
        group, plural = self.target.type.group, self.target.type.plural
        deadline = time.monotonic() + self.seconds
        with self.store.lock:
            if self.start is None:
                cursor = self.store.revision
                first = [
                    self._line("ADDED", present(self.target, o))
                    for o in self.store.items(group, plural, self.target.namespace)
                    if self._matches(o)
                ]
            else:
                cursor, first = self.start, []
        if self.initial_bookmark:
            first.append(
                self._line(
                    "BOOKMARK",
                    {
                        "apiVersion": self.target.api_version,
                        "kind": self.target.type.kind,
                        "metadata": {
                            "resourceVersion": str(cursor),
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    },
                )
            )
        try:
            for line in first:
                _chunk(handler, line)
            while not self.stopping.is_set() and time.monotonic() < deadline:
                with self.store.changed:
                    events = self.store.events_after(cursor)
                    if not events:
                        self.store.changed.wait(min(0.2, max(deadline - time.monotonic(), 0)))
                        continue
                for event in events:
                    cursor = event.revision
                    if (event.group, event.plural) == (group, plural) and self._matches(
                        event.object
                    ):
                        _chunk(handler, self._line(event.type, present(self.target, event.object)))
            handler.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True


def _chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()
