"""The HTTP layer: a stdlib ThreadingHTTPServer that routes Kubernetes API paths.

`KubeAPI` owns the store, the server thread, the request log and the catalog (built-ins plus
the CRDs in the store, rebuilt when a CRD changes). `Handler` parses a request, resolves
the URL to a `Target` or a discovery document, calls `operations`, and writes JSON (Status
objects for errors). Every request is logged as a `RequestRecord` tests can read and reset.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.services.kube_api import (
    admission,
    deletion,
    discovery,
    errors,
    kueue_visibility,
    listing,
    logs,
    openapi,
    operations,
    schemas,
)
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.faults import Fault, Faults
from tests.services.kube_api.kueue import KueueController
from tests.services.kube_api.resources import CRD_TYPE, Catalog, build_catalog
from tests.services.kube_api.seeding import seed
from tests.services.kube_api.store import Store
from tests.services.kube_api.tables import as_table
from tests.services.kube_api.target import Target
from tests.services.kube_api.watch import WatchStream

BODY_LIMIT = 3 * 1024 * 1024  # the real server's limit on a request body


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it (query values: the last one of each name)."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    status: int


class KubeAPI:
    """A running fake API server: its URL, store, request log, and client configuration."""

    def __init__(
        self,
        folder: Path,
        crd_folder: Path | None,
        defaults: bool = True,
        schema: bool = True,
        crd_versions: tuple[str, ...] | None = None,
    ) -> None:
        self.crd_folder = crd_folder
        self.crd_versions = crd_versions
        self.faults = Faults()
        self.pod_logs = logs.PodLogs()
        self.store = Store()
        self.store.defaults, self.store.schema = defaults, schema
        seed(self.store, crd_folder, crd_versions)
        self.stopping = threading.Event()  # ends open watches
        self.kueue = KueueController(self)  # off until a test starts it (kueue.py)
        self.folder = folder
        self._catalog: tuple[tuple[int, int], Catalog] | None = None
        self._log: list[RequestRecord] = []
        self._log_lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.api = self  # type: ignore[attr-defined]
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.kubeconfig = folder / "kubeconfig"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="kube-api", daemon=True
        )

    def start(self) -> None:
        self.kubeconfig.write_text(yaml.safe_dump(self.kubeconfig_dict()))
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def reset(self) -> None:
        """Forget every object, event and fault; seed the system namespaces and CRDs again."""
        store = Store()
        store.defaults, store.schema = self.store.defaults, self.store.schema
        seed(store, self.crd_folder, self.crd_versions)
        self.store = store
        self.faults.clear()
        self.pod_logs.clear()

    def snapshot(self) -> set[tuple[str, str, str, str]]:
        """The objects stored now, for `delete_created_since`."""
        return self.store.keys()

    def delete_created_since(self, snapshot: set[tuple[str, str, str, str]]) -> int:
        """Delete every object created after `snapshot` (changes to older ones stay)."""
        store = self.store
        with store.lock:
            created = sorted(store.keys() - snapshot)
            for group, plural, namespace, name in created:
                store.remove(group, plural, namespace, name)
        return len(created)

    def fail(
        self,
        code: int = 500,
        times: int = 1,
        method: str | None = None,
        path_prefix: str = "",
        after: int = 0,
        retry_after: int | None = None,
        applied: bool = False,
        delay: float = 0.0,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next `times` matching requests with `code` (see faults.py)."""
        self.faults.add(
            Fault(
                code,
                times,
                method,
                path_prefix,
                after,
                retry_after,
                applied,
                delay,
                reason,
                message,
            )
        )

    def set_pod_log(
        self,
        namespace: str,
        pod: str,
        text: str,
        container: str = "main",
        append: bool = False,
        at: datetime.datetime | None = None,
    ) -> None:
        """Set (or extend) what the pod's container has written, as a kubelet would keep it;
        each line is stamped `at` (default now). The pod must exist."""
        found = self.store.get("", "pods", namespace, pod)
        if found is None:
            raise KeyError(f"no pod {namespace}/{pod}")
        uid = str(found["metadata"].get("uid", ""))
        when = at or datetime.datetime.now(datetime.UTC)
        (self.pod_logs.append if append else self.pod_logs.set)(uid, container, text, when)

    def kubeconfig_dict(self, namespace: str = "default") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
        }

    def configuration(self) -> Any:
        """A fresh `kubernetes.client.Configuration` pointing at this server."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        return configuration

    def catalog(self) -> Catalog:
        store = self.store
        with store.lock:
            key = (id(store), store.crd_revision)
            if self._catalog is None or self._catalog[0] != key:
                crds = store.items(CRD_TYPE.group, CRD_TYPE.plural, None)
                self._catalog = (key, build_catalog(crds))
            return self._catalog[1]

    @property
    def requests(self) -> list[RequestRecord]:
        with self._log_lock:
            return list(self._log)

    def reset_requests(self) -> None:
        with self._log_lock:
            self._log.clear()

    def count(self, method: str | None = None, path_prefix: str = "") -> int:
        """How many logged requests match `method` (any if None) and start with `path_prefix`."""
        return sum(
            1
            for r in self.requests
            if (method is None or r.method == method) and r.path.startswith(path_prefix)
        )

    def record(self, entry: RequestRecord) -> None:
        with self._log_lock:
            self._log.append(entry)


class Handler(BaseHTTPRequestHandler):
    """One request: route, run the verb, answer JSON."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server_version = "trainform-fake-kube-apiserver"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # the request log replaces stderr noise

    @property
    def api(self) -> KubeAPI:
        return self.server.api  # type: ignore[attr-defined, no-any-return]

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self, method: str) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        query = {
            k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query, keep_blank_values=True).items()
        }
        content_type = self.headers.get("Content-Type", "")
        raw = self._body()
        headers: dict[str, str] = {}
        fault = self.api.faults.take(method, parsed.path)
        if fault is not None and not fault.applied:
            time.sleep(fault.delay)
            error, headers = fault.error()
            self.api.record(RequestRecord(method, parsed.path, query, content_type, error.code))
            self._send(error.code, error.status(), headers)
            return
        try:
            if len(raw) > BODY_LIMIT:
                raise ApiError(
                    413, "RequestEntityTooLarge", f"Request entity too large: limit is {BODY_LIMIT}"
                )
            schemas.begin()
            code, body = self._route(method, parsed.path, query, raw, content_type, headers)
            if method != "GET" and code < 400:
                if self.api.kueue.running:
                    self.api.kueue.reconcile(after_write=True)  # what Kueue does next
                deletion.sweep_namespaces(self.api.store)  # the namespace controller
                admission.refresh(self.api.store)  # the quota controller's status.used
        except ApiError as error:
            code, body = error.code, error.status()
        except Exception as error:  # noqa: BLE001 - a bug answers 500 like a real server would
            code, body = (
                500,
                ApiError(
                    500,
                    "InternalError",
                    f"Internal error occurred: {type(error).__name__}: {error}",
                ).status(),
            )
        warnings = [_warning_header(w) for w in schemas.end()]
        if warnings:
            headers["Warning"] = ", ".join(filter(None, [headers.get("Warning"), *warnings]))
        if fault is not None:  # carried out; now lose the answer
            time.sleep(fault.delay)
            error, headers = fault.error()
            code, body = error.code, error.status()
        self.api.record(RequestRecord(method, parsed.path, query, content_type, code))
        if isinstance(body, WatchStream):
            body.run(self)
        else:
            self._send(code, body, headers)

    def _send(self, code: int, body: Any, headers: dict[str, str]) -> None:
        if isinstance(body, str):
            data, kind = body.encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(body).encode(), "application/json"
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _accepts_json(self) -> bool:
        accept = self.headers.get("Accept", "") or "*/*"
        return any(
            part.split(";")[0].strip() in ("application/json", "*/*", "application/*")
            for part in accept.split(",")
        )

    def _wants_table(self) -> bool:
        accept = self.headers.get("Accept", "")
        return any("as=Table" in part and "application/json" in part for part in accept.split(","))

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        content_type: str,
        headers: dict[str, str],
    ) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return 200, "ok"
        if not self._accepts_json() and parts[:1] != ["openapi"]:
            raise ApiError(
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json, application/yaml",
            )
        if logs.is_log_path(parts):  # served outside the object verbs
            if method != "GET":
                raise errors.method_not_allowed()
            return 200, logs.read(self.api.store, self.api.pod_logs, parts[3], parts[5], query)
        if kueue_visibility.is_visibility_path(parts):  # Kueue's aggregated API
            if method != "GET":
                raise errors.method_not_allowed()
            return 200, kueue_visibility.pending_workloads(self.api, parts, query)
        catalog = self.api.catalog()
        if method == "GET":
            document = self._discovery(parts, catalog)
            if document is not None:
                return 200, document
        target = self._target(parts, catalog)
        warning = target.type.warnings.get(target.version)
        if warning:
            headers["Warning"] = f'299 - "{warning}"'
        return self._verb(method, target, query, raw, content_type)

    def _discovery(self, parts: list[str], catalog: Catalog) -> Any:
        if parts == ["openapi", "v3"]:
            return openapi.root(catalog)
        if parts[:2] == ["openapi", "v3"]:
            rest = parts[2:]
            found = None
            if rest[:1] == ["api"] and len(rest) == 2:
                found = openapi.document(catalog, "", rest[1])
            elif rest[:1] == ["apis"] and len(rest) == 3:
                found = openapi.document(catalog, rest[1], rest[2])
            if found is None:
                raise errors.not_found_path()
            return found
        if parts[:1] == ["openapi"]:
            raise errors.not_found_path()
        if parts == ["version"]:
            return discovery.VERSION_INFO
        if parts == ["api"]:
            return discovery.api_versions(f"127.0.0.1:{self.api.port}")
        if parts == ["api", "v1"]:
            return discovery.api_resource_list(catalog, "", "v1")
        if parts == ["apis"]:
            return discovery.api_group_list(catalog)
        if len(parts) == 2 and parts[0] == "apis":
            found = discovery.api_group(catalog, parts[1])
            if found is None:
                raise errors.not_found_path()
            return found
        if len(parts) == 3 and parts[0] == "apis":
            found = discovery.api_resource_list(catalog, parts[1], parts[2])
            if found is None:
                raise errors.not_found_path()
            return found
        return None

    def _target(self, parts: list[str], catalog: Catalog) -> Target:
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.not_found_path()
        namespace: str | None = None
        own_subresource = not group and len(rest) == 3 and rest[2] in ("status", "finalize")
        if len(rest) >= 3 and rest[0] == "namespaces" and not own_subresource:
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise errors.not_found_path()
        found = catalog.find(group, version, rest[0])
        if found is None or (namespace is not None and not found.namespaced):
            raise errors.not_found_path()
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else ""
        if subresource and (subresource != "status" or not found.status_subresource):
            raise errors.not_found_path()
        if found.namespaced and name is not None and namespace is None:
            raise errors.not_found_path()
        return Target(found, version, namespace, name, subresource)

    def _verb(
        self,
        method: str,
        target: Target,
        query: dict[str, str],
        raw: bytes,
        content_type: str,
    ) -> tuple[int, Any]:
        store, agent = self.api.store, self.headers.get("User-Agent", "")
        if target.name is None:
            if method == "GET":
                if query.get("watch") in ("true", "1"):
                    return 200, WatchStream(store, target, query, self.api.stopping)
                listed = listing.list_objects(store, target, query)
                return 200, as_table(target, listed) if self._wants_table() else listed
            if method == "POST" and (target.namespace is not None or not target.type.namespaced):
                return 201, operations.create(
                    store, target, _decode(raw, content_type), query, agent
                )
            if method == "DELETE":
                return 200, deletion.delete_collection(
                    store, target, query, _decode_optional(raw, content_type)
                )
            raise errors.method_not_allowed()
        if method == "GET":
            found = operations.get(store, target)
            return 200, as_table(target, {"items": [found]}) if self._wants_table() else found
        if method == "PUT":
            return 200, operations.update(store, target, _decode(raw, content_type), query, agent)
        if method == "PATCH":
            return operations.patch(store, target, raw, content_type, query, agent)
        if method == "DELETE" and not target.subresource:
            return 200, deletion.delete(store, target, query, _decode_optional(raw, content_type))
        raise errors.method_not_allowed()


def _warning_header(text: str) -> str:
    """A `Warning: 299 - "..."` value; header values are Latin-1, so other characters are
    escaped (a field named in a warning may be any JSON string)."""
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return '299 - "' + quoted.encode("ascii", "backslashreplace").decode("ascii") + '"'


def _decode(raw: bytes, content_type: str) -> Any:
    kind = content_type.split(";", 1)[0].strip().lower()
    try:
        if kind in ("application/yaml", "application/x-yaml"):
            return yaml.safe_load(raw.decode())
        if kind in ("", "application/json", "*/*"):
            return json.loads(raw or b"null")
    except (ValueError, yaml.YAMLError) as error:
        raise errors.bad_request(f"the body of the request could not be decoded: {error}") from None
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown "
        f"format - accepted media types include: application/json, "
        f"application/yaml ({kind})",
    )


def _decode_optional(raw: bytes, content_type: str) -> Any:
    return _decode(raw, content_type) if raw.strip() else None
