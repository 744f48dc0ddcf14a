"""The kubernetes provider's one door to the API server (official `kubernetes` client).

`KubeClient` builds an ApiClient from a kubeconfig and context (as kubectl would: the
connection's kubeconfig, else $KUBECONFIG / ~/.kube/config, else the in-cluster service
account) and speaks REST through it for every kind in kinds.py: get, list (one request,
filtered by a label selector), server-side apply (`application/apply-patch+yaml` with the
field manager; `force` only when the connection says so), merge patch and delete. It
reads raw JSON, so a create (201) and an update (200) come back alike.

Errors, "cannot <verb> <object>: <cause>" with the server's own message:
  429, 502, 503, 504, timeouts, refused connections -> TransientProviderError (Retry-After
      honoured), and a 500 unless it says the request itself cannot succeed (below)
  409 on apply -> PermanentProviderError naming the other field manager and its fields;
      one with this field manager's own earlier Update entries only is taken over (apply)
  anything else -> PermanentProviderError
A 5xx is permanent when retrying the same request cannot help (`is_transient`): 501 Not
Implemented; a Status whose reason is a client error (BadRequest, Invalid, Forbidden,
...); an admission webhook that failed closed ("failed calling webhook", the API server's
ErrCallingWebhook wrapped as an InternalError, apiserver pkg/admission/plugin/webhook) or
denied the request with a 5xx code ("admission webhook ... denied the request",
webhook/errors/statuserror.go); a CRD conversion webhook that failed. A 5xx that asks to be
retried (a Retry-After, reason ServerTimeout: apimachinery errors.go SuggestsClientDelay)
is always transient.
`requests` counts the requests sent (tests assert batching with it).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from trainform.providers.errors import (
    PermanentProviderError,
    ProviderConfigError,
    TransientProviderError,
)
from trainform.providers.kubernetes.kinds import BY_KIND, MINIMUM_KUEUE, ApiKind
from trainform.specs.secrets import redact, register_credential, register_secret

TIMEOUT = 30.0


def make_api_client(kubeconfig: str, context: str, spec_root: Path | None = None) -> Any:
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    path = kubeconfig
    if path and spec_root is not None and not os.path.isabs(path):
        path = str(spec_root / path)
    try:
        if (
            not path
            and not os.environ.get("KUBECONFIG")
            and not Path("~/.kube/config").expanduser().exists()
            and os.environ.get("KUBERNETES_SERVICE_HOST")
        ):
            config.load_incluster_config()
            return _registered(client.ApiClient())
        return _registered(
            config.new_client_from_config(config_file=path or None, context=context or None)
        )
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        raise ProviderConfigError(
            f"cannot load kubeconfig {path or '(default)'}"
            f"{f' context {context}' if context else ''}: {exc}"
        ) from None


def _registered(api_client: Any) -> Any:
    """Register the credentials a kubeconfig gave (token, user name and password) for
    redaction, so a server's echo of them is redacted in any encoding."""
    configuration = getattr(api_client, "configuration", None)
    for value in (getattr(configuration, "api_key", None) or {}).values():
        if isinstance(value, str):
            register_secret(value.split(" ", 1)[-1])  # "Bearer <token>" or the token alone
    register_credential(
        getattr(configuration, "username", None) or None,
        getattr(configuration, "password", None) or None,
    )
    return api_client


def describe(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj.get('kind', 'object')} {where}{metadata.get('name', '')}"


def _message(body: bytes | str) -> tuple[str, dict[str, Any]]:
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    try:
        status = json.loads(text)
    except ValueError:
        return redact(text[:4000]).strip()[:500], {}  # redacted before it is cut short
    if not isinstance(status, dict):
        return redact(str(status)[:4000])[:500], {}
    return str(status.get("message") or status.get("reason") or ""), status


def conflict_message(what: str, status: dict[str, Any], message: str) -> str:
    causes = (status.get("details") or {}).get("causes") or []
    fields = [str(c.get("field", "")) for c in causes if c.get("field")]
    managers = sorted(
        {
            part.split('"')[1]
            for c in causes
            for part in [str(c.get("message", ""))]
            if part.count('"') >= 2
        }
    )
    who = ", ".join(managers) or "another field manager"
    cause = f"{', '.join(fields)}" if fields and managers else message
    return (
        f"cannot apply {what}: conflict with field manager {who} on {cause}; trainform does "
        "not take over fields another manager set (undo that manager's change, or take them "
        'with the annotation trainform.dev/force-conflicts: "true" on the spec, or '
        "forceConflicts: true on the connection)"
    )


CLIENT_ERROR_REASONS = frozenset(
    {
        "BadRequest",
        "Invalid",
        "Forbidden",
        "Unauthorized",
        "NotFound",
        "AlreadyExists",
        "Gone",
        "MethodNotAllowed",
        "NotAcceptable",
        "UnsupportedMediaType",
        "RequestEntityTooLarge",
    }
)
"""metav1.StatusReason values that blame the request (apimachinery meta/v1 types.go)."""
FAILED_WEBHOOK_MARKS = ("failed calling webhook", "denied the request", "conversion webhook for")
"""What the API server writes when an admission webhook failed closed or denied, and when
a CRD conversion webhook failed (apiextensions-apiserver conversion/webhook_converter.go)."""


def is_transient(code: int, status: dict[str, Any], retry_after: float | None) -> bool:
    """Whether retrying the same request later can succeed (429 and most 5xx)."""
    if code == 429:
        return True
    if code < 500:
        return False
    details = status.get("details") or {}
    reason = str(status.get("reason") or "")
    if retry_after or details.get("retryAfterSeconds") or reason == "ServerTimeout":
        return True  # the server asks for the retry (SuggestsClientDelay)
    message = str(status.get("message") or "")
    if code == 501 or reason in CLIENT_ERROR_REASONS:
        return False
    return not any(mark in message for mark in FAILED_WEBHOOK_MARKS)


def _permanent_hint(message: str) -> str:
    if "failed calling webhook" in message:
        return (
            "; the API server could not call an admission webhook whose failurePolicy is "
            "Fail, so it refuses every such write until the webhook's service answers "
            "(for a kueue.x-k8s.io webhook: is Kueue's controller manager running?); "
            "apply again once it is"
        )
    return ""


def own_update_conflict(status: dict[str, Any], field_manager: str) -> bool:
    """A 409 of an apply whose every conflict is with an Update entry of `field_manager`
    itself (`conflict with "<manager>" using <apiVersion>`: the real server keys managers by
    name and operation, managedfields/internal/conflict.go printManager)."""
    causes = (status.get("details") or {}).get("causes") or []
    mine = f"conflict with {json.dumps(field_manager)} using "
    return bool(causes) and all(str(c.get("message", "")).startswith(mine) for c in causes)


def _retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("Retry-After") if headers is not None else None
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class KubeClient:
    def __init__(self, api_client: Any) -> None:
        self.api = api_client
        self.requests = 0
        self._answer = threading.local()  # Retry-After of this thread's last answer

    def close(self) -> None:
        closer = getattr(self.api, "close", None)
        if closer is not None:
            closer()

    def _send(
        self,
        method: str,
        path: str,
        doing: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> tuple[int, bytes]:
        """(status, body) of one request; remembers the answer's Retry-After."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        self.requests += 1
        try:
            verb, url, header_params, payload, _ = self.api.param_serialize(
                method,
                path,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(
                verb, url, header_params=header_params, body=payload, _request_timeout=TIMEOUT
            )
            data = response.read() or b""
            self._answer.retry_after = _retry_after(response.headers)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientProviderError(f"cannot {doing}: {exc}") from None
        except ApiException as exc:  # the client raises it on some paths (retries given up)
            self._answer.retry_after = _retry_after(exc.headers)
            body = exc.body or b""
            return int(exc.status or 0), body if isinstance(body, bytes) else str(body).encode()
        return int(response.status), data

    def _check(self, status: int, data: bytes, doing: str) -> Any:
        if 200 <= status < 300:
            return json.loads(data) if data else {}
        message, details = _message(data)
        retry_after = getattr(self._answer, "retry_after", None)
        if is_transient(status, details, retry_after):
            raise TransientProviderError(f"cannot {doing}: {status} {message}", retry_after)
        raise PermanentProviderError(
            f"cannot {doing}: {status} {message}{_permanent_hint(message)}"
        )

    def get(self, api: ApiKind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        doing = f"read {api.kind} {f'{namespace}/' if namespace else ''}{name}"
        status, data = self._send("GET", api.path(namespace, name), doing)
        if status == 404:
            return None
        return self._check(status, data, doing)  # type: ignore[no-any-return]

    def text(self, path: str, query: list[tuple[str, str]], doing: str) -> str | None:
        """A plain-text read such as a pod's log (`doing` as in "read the log of ..."):
        None on 404, errors as for every other request."""
        status, data = self._send("GET", path, doing, query)
        if status == 404:
            return None
        if 200 <= status < 300:
            return data.decode(errors="replace")
        self._check(status, data, doing)
        return None

    def list(
        self,
        api: ApiKind,
        selector: str = "",
        namespace: str | None = None,
        page: int = 0,
    ) -> list[dict[str, Any]]:
        """Every object of the kind (in `namespace`, or cluster-wide) matching `selector`:
        one request, or with `page` one request per `page` objects (limit/continue); each
        item gets its kind and apiVersion back."""
        doing = f"list {api.plural}{f' in {namespace}' if namespace else ''}"
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [("labelSelector", selector)] if selector else []
            if page:
                query.append(("limit", str(page)))
            if token:
                query.append(("continue", token))
            status, data = self._send("GET", api.path(namespace), doing, query)
            if status == 404 and api.namespaced and namespace:
                return []  # the namespace is gone, so is everything in it
            if status == 404:
                raise PermanentProviderError(f"cannot {doing}: {self._not_served(api)}")
            answer = self._check(status, data, doing)
            items += answer.get("items") or []
            token = str((answer.get("metadata") or {}).get("continue") or "")
            if not page or not token:
                break
        for item in items:
            item.setdefault("kind", api.kind)
            item.setdefault("apiVersion", api.api_version)
        return items

    def _not_served(self, api: ApiKind) -> str:
        """Why the cluster has no `api`: for Kueue kinds, whether only v1beta1 is there."""
        found = f"the cluster does not serve {api.api_version} {api.kind}"
        if not api.api_version.startswith("kueue.x-k8s.io/"):
            return found
        status, _ = self._send("GET", "/apis/kueue.x-k8s.io/v1beta1", "discover Kueue", [])
        if status == 200:
            return (
                f"{found}: the cluster serves only Kueue's v1beta1 API; trainform needs "
                f"Kueue {MINIMUM_KUEUE} or later (kueue.x-k8s.io/v1beta2)"
            )
        return f"{found}: Kueue is not installed (trainform needs Kueue {MINIMUM_KUEUE} or later)"

    def _send_apply(
        self, manifest: dict[str, Any], field_manager: str, force: bool
    ) -> tuple[int, bytes]:
        api = BY_KIND[manifest["kind"]]
        metadata = manifest["metadata"]
        query = [("fieldManager", field_manager)] + ([("force", "true")] if force else [])
        return self._send(
            "PATCH",
            api.path(metadata.get("namespace"), metadata["name"]),
            f"apply {describe(manifest)}",
            query,
            manifest,
            "application/apply-patch+yaml",
        )

    def apply(self, manifest: dict[str, Any], field_manager: str, force: bool) -> dict[str, Any]:
        what = describe(manifest)
        status, data = self._send_apply(manifest, field_manager, force)
        if status == 409:
            message, details = _message(data)
            if not force and own_update_conflict(details, field_manager):
                return self._take_over_own(manifest, field_manager)
            raise PermanentProviderError(conflict_message(what, details, message))
        return self._check(status, data, f"apply {what}")  # type: ignore[no-any-return]

    def _take_over_own(self, manifest: dict[str, Any], field_manager: str) -> dict[str, Any]:
        """Apply over fields that only this field manager's own Update entries hold (left
        by a trainform that merge-patched them). Pinned to the resourceVersion just read,
        the apply is forced only after, at that very version, it conflicted with nothing
        else; an object changed in between is a transient error (read again, retry)."""
        metadata = manifest["metadata"]
        what = describe(manifest)
        live = self.get(BY_KIND[manifest["kind"]], metadata["name"], metadata.get("namespace"))
        if live is None:
            raise TransientProviderError(f"cannot apply {what}: it went away while applied")
        version = (live.get("metadata") or {}).get("resourceVersion", "")
        pinned = {**manifest, "metadata": {**metadata, "resourceVersion": version}}
        status, data = self._send_apply(pinned, field_manager, False)
        if status == 409:
            message, details = _message(data)
            if own_update_conflict(details, field_manager):
                status, data = self._send_apply(pinned, field_manager, True)
            elif (details.get("details") or {}).get("causes"):
                raise PermanentProviderError(conflict_message(what, details, message))
        if status == 409:  # the resourceVersion moved on: someone wrote in between
            message, _ = _message(data)
            raise TransientProviderError(f"cannot apply {what}: {message}")
        return self._check(status, data, f"apply {what}")  # type: ignore[no-any-return]

    def merge_patch(
        self,
        api: ApiKind,
        name: str,
        namespace: str | None,
        patch: dict[str, Any],
        field_manager: str,
        subresource: str = "",
    ) -> dict[str, Any]:
        path = api.path(namespace, name) + (f"/{subresource}" if subresource else "")
        doing = f"patch {api.kind} {name}"
        status, data = self._send(
            "PATCH",
            path,
            doing,
            [("fieldManager", field_manager)],
            patch,
            "application/merge-patch+json",
        )
        return self._check(status, data, doing)  # type: ignore[no-any-return]

    def delete(self, api: ApiKind, name: str, namespace: str | None = None) -> bool:
        """Delete (background propagation); False when it was already gone."""
        doing = f"delete {api.kind} {f'{namespace}/' if namespace else ''}{name}"
        status, data = self._send(
            "DELETE",
            api.path(namespace, name),
            doing,
            body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            content_type="application/json",
        )
        if status == 404:
            return False
        self._check(status, data, doing)
        return True
