"""The pod log subresource: `GET /api/v1/namespaces/{ns}/pods/{name}/log`.

There is no kubelet behind the fake server, so a container's log is whatever a test set
with `KubeAPI.set_pod_log` (kept per pod uid and container: a pod deleted and created
again under the same name starts empty, and a deleted pod's log is gone, as on a node).
Each line is stamped with the time it was set, which `sinceSeconds` and `timestamps` use.

What the real server does and this one copies:
- options are validated first (422 `PodLogOptions "<pod>" is invalid: ...`): `tailLines`
  >= 0, `limitBytes` and `sinceSeconds` > 0, not both `sinceSeconds` and `sinceTime`; a
  value that is not a number is a 400;
- a missing pod is 404; without `container` a pod of one container answers that one,
  otherwise 400 "a container name must be specified ..."; an unknown container is 400
  "container X is not valid for pod Y";
- a pod with no node assigned answers an empty body (there is no kubelet to ask);
- the kubelet's refusals come back as 400 with its text: a container with no status yet
  ("is not available"), a waiting one ("is waiting to start: <reason>"), `previous` (no
  container here ever restarts, so there is never a previous instance);
- the kubelet applies `tailLines` to the log, then `sinceSeconds`/`sinceTime`, then cuts
  the output at `limitBytes` (possibly in the middle of a line); `timestamps=true` puts
  each line's RFC3339Nano time in front of it.
- the body is `text/plain`.

Known gap: `follow=true` answers what is there now and ends (no streaming).
"""

from __future__ import annotations

import datetime
import threading
from typing import Any

from tests.services.kube_api import errors
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.store import Store

Line = tuple[datetime.datetime, str]


class PodLogs:
    """Log lines by (pod uid, container), under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: dict[tuple[str, str], list[Line]] = {}

    def set(self, uid: str, container: str, text: str, at: datetime.datetime) -> None:
        lines = [(at, line) for line in text.splitlines(keepends=True)]
        with self._lock:
            self._lines[(uid, container)] = lines

    def append(self, uid: str, container: str, text: str, at: datetime.datetime) -> None:
        with self._lock:
            self._lines.setdefault((uid, container), []).extend(
                (at, line) for line in text.splitlines(keepends=True)
            )

    def get(self, uid: str, container: str) -> list[Line]:
        with self._lock:
            return list(self._lines.get((uid, container), []))

    def clear(self) -> None:
        with self._lock:
            self._lines.clear()


def is_log_path(parts: list[str]) -> bool:
    """Whether the URL's parts are /api/v1/namespaces/<ns>/pods/<name>/log."""
    return (
        len(parts) == 7
        and parts[:3] == ["api", "v1", "namespaces"]
        and (
            parts[4],
            parts[6],
        )
        == ("pods", "log")
    )


def _integer(query: dict[str, str], name: str) -> int | None:
    text = query.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def _since_time(text: str) -> datetime.datetime:
    try:
        value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise errors.bad_request(
            f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": cannot parse'
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


def _invalid(pod: str, field: str, problem: str) -> ApiError:
    return errors.invalid("PodLogOptions", "", pod, field, problem)


def _container(pod: dict[str, Any], name: str, asked: str) -> str:
    spec = pod.get("spec") or {}
    regular = [c.get("name", "") for c in spec.get("containers") or []]
    init = [c.get("name", "") for c in spec.get("initContainers") or []]
    ephemeral = [c.get("name", "") for c in spec.get("ephemeralContainers") or []]
    if not asked:
        if len(regular) == 1:
            return regular[0]
        message = (
            f"a container name must be specified for pod {name}, "
            f"choose one of: [{' '.join(regular)}]"
        )
        if init:
            message += f" or one of the init containers: [{' '.join(init)}]"
        raise errors.bad_request(message)
    if asked not in regular + init + ephemeral:
        raise errors.bad_request(f"container {asked} is not valid for pod {name}")
    return asked


def _kubelet_check(pod: dict[str, Any], name: str, container: str, previous: bool) -> None:
    status = pod.get("status") or {}
    found = None
    for group in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for entry in status.get(group) or []:
            if entry.get("name") == container:
                found = entry
    if found is None:
        raise errors.bad_request(f'container "{container}" in pod "{name}" is not available')
    if previous:
        raise errors.bad_request(
            f'previous terminated container "{container}" in pod "{name}" not found'
        )
    state = found.get("state") or {}
    if "running" in state or "terminated" in state:
        return
    waiting = state.get("waiting")
    if waiting is not None:
        reason = waiting.get("reason") or ""
        raise errors.bad_request(
            f'container "{container}" in pod "{name}" is waiting to start: {reason}'
        )
    raise errors.bad_request(
        f'container "{container}" in pod "{name}" is waiting to start - no logs yet'
    )


def read(store: Store, logs: PodLogs, namespace: str, name: str, query: dict[str, str]) -> str:
    """The body of one pod log request, or an ApiError as the real server answers it."""
    tail = _integer(query, "tailLines")
    limit = _integer(query, "limitBytes")
    since_seconds = _integer(query, "sinceSeconds")
    since_text = query.get("sinceTime") or ""
    if tail is not None and tail < 0:
        raise _invalid(
            name, "tailLines", f"Invalid value: {tail}: must be greater than or equal to 0"
        )
    if limit is not None and limit < 1:
        raise _invalid(name, "limitBytes", f"Invalid value: {limit}: must be greater than 0")
    if since_seconds is not None and since_text:
        raise _invalid(
            name, "", "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
        )
    if since_seconds is not None and since_seconds < 1:
        raise _invalid(
            name, "sinceSeconds", f"Invalid value: {since_seconds}: must be greater than 0"
        )
    since = _since_time(since_text) if since_text else None
    pod = store.get("", "pods", namespace, name)
    if pod is None:
        raise errors.not_found("", "pods", name)
    container = _container(pod, name, query.get("container") or "")
    if not (pod.get("spec") or {}).get("nodeName"):
        return ""
    _kubelet_check(pod, name, container, _flag(query, "previous"))
    lines = logs.get(str(pod["metadata"].get("uid", "")), container)
    if tail is not None:
        lines = lines[len(lines) - tail :] if tail else []
    if since_seconds is not None:
        since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=since_seconds)
    if since is not None:
        lines = [line for line in lines if line[0] >= since]
    stamped = _flag(query, "timestamps")
    text = "".join(
        f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {line}" if stamped else line
        for at, line in lines
    )
    if limit is not None:
        text = text.encode()[:limit].decode(errors="ignore")
    return text
