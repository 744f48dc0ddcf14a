"""OCI registry test servers: Debian's `docker-registry` (distribution 2.8) on 127.0.0.1.

`start_registry` runs one registry on a filesystem root with deletes enabled, open to all
or protected by htpasswd (Basic) or by a token service (Bearer, `TokenService` below, a
small in-process issuer of RS256 tokens signed by a throwaway certificate). Protected
registries may share the root of an open one: tests push images through the open one with
plain HTTP (`push_image`) and read or promote them through the protected one.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import io
import json
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests

from tests.services.common import find_program, free_ports, launch, stop, unavailable, wait_for_port

USERNAME = "trainform-ci"
PASSWORD = "s3cr3t-Pa55word-never-shown"
SERVICE = "trainform-test-registry"
ISSUER = "trainform-test-issuer"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass
class RegistryServer:
    url: str
    host: str
    root: Path
    process: Any
    auth: str = "none"
    tokens: TokenService | None = None

    def stop(self) -> None:
        stop(self.process)
        if self.tokens is not None:
            self.tokens.stop()


def start_registry(folder: Path, auth: str = "none", storage: Path | None = None) -> RegistryServer:
    """A registry under `folder` (storage under `storage`, default `folder/data`), with
    `auth` "none", "htpasswd" or "token"."""
    program = find_program("docker-registry") or find_program("registry")
    if program is None:
        unavailable(
            "docker-registry is not installed (scripts/services.sh installs the Debian package)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    root = storage or folder / "data"
    (port,) = free_ports(1)
    tokens = None
    auth_section: dict[str, Any] = {}
    if auth == "htpasswd":
        auth_section = {"htpasswd": {"realm": "trainform-test", "path": str(_htpasswd(folder))}}
    elif auth == "token":
        tokens = TokenService(folder)
        auth_section = {
            "token": {
                "realm": tokens.realm,
                "service": SERVICE,
                "issuer": ISSUER,
                "rootcertbundle": str(tokens.certificate_file),
            }
        }
    config = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {
            "filesystem": {"rootdirectory": str(root)},
            "delete": {"enabled": True},
            "maintenance": {"uploadpurging": {"enabled": False}},
        },
        "http": {"addr": f"127.0.0.1:{port}", "secret": "trainform-test-secret"},
        **({"auth": auth_section} if auth_section else {}),
    }
    config_file = folder / "config.yml"
    config_file.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    log = folder / "registry.log"
    process = launch([program, "serve", str(config_file)], folder, log, {"PATH": "/usr/bin:/bin"})
    wait_for_port(port, process, log, timeout=30)
    host = f"127.0.0.1:{port}"
    return RegistryServer(f"http://{host}", host, root, process, auth, tokens)


def serve_registry(
    folder: Path, auth: str = "none", storage: Path | None = None
) -> Iterator[RegistryServer]:
    server = start_registry(folder, auth, storage)
    try:
        yield server
    finally:
        server.stop()


def _htpasswd(folder: Path) -> Path:
    import bcrypt

    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    path = folder / "htpasswd"
    path.write_text(f"{USERNAME}:{hashed}\n", encoding="utf-8")
    return path


# images -----------------------------------------------------------------------------------


def layer_bytes(payload: bytes) -> bytes:
    """A gzipped tar holding one file, byte-identical for the same payload."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("payload.txt")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return gzip.compress(archive.getvalue(), mtime=0)


def sha256(data: bytes) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class PushedImage:
    digest: str
    manifest: bytes
    blobs: list[str] = field(default_factory=list)


def push_image(
    url: str,
    repository: str,
    tag: str,
    labels: dict[str, str] | None = None,
    payload: bytes = b"hello from trainform tests\n",
    architecture: str = "amd64",
) -> PushedImage:
    """Build an OCI image (config with `labels`, one layer) and push it as `repository:tag`."""
    layer = layer_bytes(payload)
    config = json.dumps(
        {
            "architecture": architecture,
            "os": "linux",
            "config": {"Labels": labels or {}},
            "rootfs": {"type": "layers", "diff_ids": [sha256(gzip.decompress(layer))]},
        },
        sort_keys=True,
    ).encode()
    for blob in (config, layer):
        _push_blob(url, repository, blob)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": sha256(config), "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": sha256(layer), "size": len(layer)}],
        },
        sort_keys=True,
    ).encode()
    digest = put_manifest(url, repository, tag, manifest, OCI_MANIFEST)
    return PushedImage(digest, manifest, [sha256(config), sha256(layer)])


def push_index(url: str, repository: str, tag: str, images: dict[str, PushedImage]) -> str:
    """Push an index of already pushed images keyed by architecture (in that order)."""
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": image.digest,
                    "size": len(image.manifest),
                    "platform": {"os": "linux", "architecture": architecture},
                }
                for architecture, image in images.items()
            ],
        },
        sort_keys=True,
    ).encode()
    return put_manifest(url, repository, tag, index, OCI_INDEX)


def put_manifest(url: str, repository: str, reference: str, body: bytes, media_type: str) -> str:
    response = requests.put(
        f"{url}/v2/{repository}/manifests/{reference}",
        data=body,
        headers={"Content-Type": media_type},
        timeout=30,
    )
    response.raise_for_status()
    assert response.headers["Docker-Content-Digest"] == sha256(body)
    return sha256(body)


def _push_blob(url: str, repository: str, blob: bytes) -> None:
    started = requests.post(f"{url}/v2/{repository}/blobs/uploads/", timeout=30)
    started.raise_for_status()
    location = started.headers["Location"]
    location = location if location.startswith("http") else url + location
    separator = "&" if "?" in location else "?"
    done = requests.put(
        f"{location}{separator}digest={sha256(blob)}",
        data=blob,
        headers={"Content-Type": "application/octet-stream"},
        timeout=30,
    )
    done.raise_for_status()


def head_digest(url: str, repository: str, reference: str) -> str | None:
    """The digest `repository:reference` has on an open registry, None when absent."""
    response = requests.head(
        f"{url}/v2/{repository}/manifests/{reference}",
        headers={"Accept": f"{OCI_MANIFEST}, {OCI_INDEX}"},
        timeout=30,
    )
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.headers["Docker-Content-Digest"]


def unique_repository(prefix: str = "test") -> str:
    return f"{prefix}/{uuid.uuid4().hex[:12]}"


# the token service --------------------------------------------------------------------------


class TokenService:
    """Issues registry tokens (RS256, x5c-signed) granting what is asked to USERNAME/PASSWORD
    and nothing to anyone else; records each request's scopes."""

    def __init__(self, folder: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.certificate_file = folder / "token-cert.pem"
        self.certificate_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        self._x5c = base64.b64encode(certificate.public_bytes(serialization.Encoding.DER)).decode()
        self.requests: list[list[str]] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                service.answer(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.realm = f"http://127.0.0.1:{self.server.server_port}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        query = parse_qsl(urlsplit(handler.path).query)
        scopes = [value for key, value in query if key == "scope"]
        self.requests.append(scopes)
        expected = "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        if handler.headers.get("Authorization") not in (None, expected):
            handler.send_response(401)
            handler.end_headers()
            return
        granted = [] if handler.headers.get("Authorization") is None else scopes
        body = json.dumps({"token": self.token(granted), "expires_in": 300}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def token(self, scopes: list[str]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        access = []
        for scope in " ".join(scopes).split():
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        claims = {
            "iss": ISSUER,
            "sub": USERNAME,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# a registry that fails ----------------------------------------------------------------------


class FailingRegistry:
    """An HTTP server answering every request with `status` and a distribution error body,
    as a registry behind a broken backend does."""

    def __init__(self, status: int = 500, retry_after: str | None = None) -> None:
        def reply(handler: BaseHTTPRequestHandler) -> None:
            body = json.dumps(
                {"errors": [{"code": "UNKNOWN", "message": "storage backend unavailable"}]}
            ).encode()
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            if retry_after:
                handler.send_header("Retry-After", retry_after)
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(body)

        class Handler(BaseHTTPRequestHandler):
            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = reply  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_port}"
        self.url = f"http://{self.host}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class MountDecliningProxy:
    """Forwards everything to a registry but drops `mount`/`from` from upload starts, so the
    registry answers 202 (an upload) as registries do when they decline a mount; counts the
    mount attempts it saw."""

    def __init__(self, upstream: str) -> None:
        self.mount_attempts = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def forward(self) -> None:
                proxy.forward(self, upstream)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = forward  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_port}"
        self.url = f"http://{self.host}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(self, handler: BaseHTTPRequestHandler, upstream: str) -> None:
        parts = urlsplit(handler.path)
        query = parse_qsl(parts.query, keep_blank_values=True)
        if handler.command == "POST" and any(key == "mount" for key, _ in query):
            self.mount_attempts += 1
            query = [(key, value) for key, value in query if key not in ("mount", "from")]
        length = int(handler.headers.get("Content-Length") or 0)
        headers = {k: v for k, v in handler.headers.items() if k.lower() != "content-length"}
        headers["Host"] = self.host
        response = requests.request(
            handler.command,
            upstream + parts.path,
            params=query,
            data=handler.rfile.read(length) if length else None,
            headers=headers,
            allow_redirects=False,
            timeout=30,
        )
        handler.send_response(response.status_code)
        for key, value in response.headers.items():
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                handler.send_header(key, value)
        size = response.headers.get("Content-Length", "0")
        handler.send_header(
            "Content-Length", size if handler.command == "HEAD" else str(len(response.content))
        )
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(response.content)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
