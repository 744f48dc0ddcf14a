"""Attempt logs on Kubernetes: the pods' logs through the API, and their archive on S3.

An attempt's log is the text of its pods' `main` container (`GET .../pods/<pod>/log`), one
pod after another in completion-index order. A multi-node attempt puts a header line
before each pod's text (`==> pod <name> on <node> (index <i>) <==`); a one-node attempt is
the pod's text as written. While the attempt runs only the pod of index 0 is read (its
text only grows, so an offset into it stays valid); the other pods follow once it has
finished. Offsets count bytes of that concatenated text.

Pods go with their Job (cancel, TTL, garbage collection), so trainform archives a finished
attempt's log when it next writes (providers/kubernetes/runs.py): beside the run's
checkpoints, `<checkpoint prefix>/<run id>/logs/attempt-<N>.log` (evaluations:
`logs/eval-<suite>-attempt-<N>.log`), when the prefix is s3://. Reading falls back to the
archive when the pods are gone. A pod that has not started (no node, container waiting)
has no log yet and costs no request.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.jobs import LogChunk
from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.jobs import CONTAINER, run_location
from trainform.providers.kubernetes.timeline import POD, pod_index


def archive_location(entry: dict[str, Any]) -> str:
    """Where the attempt's log is archived, "" when its checkpoint prefix is not on S3."""
    location = run_location(str(entry.get("checkpointPrefix") or ""), str(entry.get("runId")))
    if not location.startswith("s3://"):
        return ""
    attempt = int(entry.get("attempt", 0))
    if entry.get("kind") == "eval":
        suite = str(entry.get("suite") or "").rsplit("/", 1)[-1]
        return f"{location}/logs/eval-{suite}-attempt-{attempt}.log"
    return f"{location}/logs/attempt-{attempt}.log"


def _has_log(pod: dict[str, Any]) -> bool:
    if not (pod.get("spec") or {}).get("nodeName"):
        return False
    for entry in (pod.get("status") or {}).get("containerStatuses") or []:
        if entry.get("name") == CONTAINER:
            state = entry.get("state") or {}
            return "running" in state or "terminated" in state
    return False


def _pod_text(client: KubeClient, pod: dict[str, Any]) -> str:
    if not _has_log(pod):
        return ""
    metadata = pod["metadata"]
    path = POD.path(metadata.get("namespace"), metadata["name"]) + "/log"
    doing = f"read the log of pod {metadata.get('namespace')}/{metadata['name']}"
    return client.text(path, [("container", CONTAINER)], doing) or ""


def pods_text(client: KubeClient, pods: list[dict[str, Any]], nodes: int, finished: bool) -> str:
    """The attempt's log as its pods hold it now (see the module docstring)."""
    shown = pods if finished else [p for p in pods if pod_index(p) == 0][:1]
    headers = nodes > 1 or len(pods) > 1
    parts = []
    for pod in shown:
        text = _pod_text(client, pod)
        if headers:
            node = (pod.get("spec") or {}).get("nodeName") or "no node"
            name = pod["metadata"]["name"]
            parts.append(f"==> pod {name} on {node} (index {pod_index(pod)}) <==\n")
        parts.append(text if not finished or text.endswith("\n") or not text else text + "\n")
    return "".join(parts)


def chunk(text: str, offset: int, complete: bool, location: str) -> LogChunk:
    data = text.encode()
    start = max(0, min(offset, len(data)))
    return LogChunk(data[start:].decode(errors="replace"), len(data), complete, location)


def _boto_errors() -> tuple[type[Exception], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def write_archive(s3: Any, uri: str, text: str) -> None:
    """Write the log to `uri` through the boto3 S3 client `s3`."""
    from trainform.providers.objectstore.client import provider_error, split_s3_uri

    bucket, key = split_s3_uri(uri)
    try:
        s3.put_object(
            Bucket=bucket, Key=key, Body=text.encode(), ContentType="text/plain; charset=utf-8"
        )
    except _boto_errors() as exc:
        raise provider_error(exc, f"cannot archive the log to {uri}") from None


def read_archive(s3: Any, uri: str) -> str | None:
    """The archived log, None when there is none."""
    from trainform.providers.objectstore.client import is_not_found, provider_error, split_s3_uri

    bucket, key = split_s3_uri(uri)
    try:
        answer = s3.get_object(Bucket=bucket, Key=key)
        return bytes(answer["Body"].read()).decode(errors="replace")
    except _boto_errors() as exc:
        if is_not_found(exc):
            return None
        raise provider_error(exc, f"cannot read the log archive {uri}") from None
