"""An HTTP client of the OCI distribution API, over one reused `requests` session.

Called by the registry provider. Status codes become provider errors here: unreachable,
5xx and 429 are TransientProviderError; 401/403 and other 4xx are PermanentProviderError.
A 404 is an error too, except where a method says "None when absent" (manifests, blobs):
only those callers may read it as "does not exist". Error messages carry the registry's
own words and never a credential or token: the registry's answer is redacted
(`specs.secrets.redact`) before it is shortened, and again by the provider error itself.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urljoin, urlsplit

import requests
from trainform.providers.errors import PermanentProviderError, TransientProviderError
from trainform.providers.oci.auth import Authenticator, Credentials
from trainform.providers.oci.manifests import ACCEPT, Manifest, sha256_digest
from trainform.specs.secrets import redact

CHUNK = 1 << 20
SPOOL_IN_MEMORY = 64 << 20
PAGE_SIZE = 100


@dataclass(frozen=True)
class Descriptor:
    digest: str
    media_type: str
    size: int


class RegistryClient:
    def __init__(self, url: str, credentials: Credentials | None, timeout: float = 30.0) -> None:
        self.base = url.rstrip("/")
        self.host = urlsplit(self.base).netloc
        self.timeout = timeout
        self.session = requests.Session()
        self.auth = Authenticator(credentials)

    def __repr__(self) -> str:
        return f"RegistryClient({self.base!r})"

    def close(self) -> None:
        self.session.close()

    # manifests ---------------------------------------------------------------------------

    def head_manifest(self, repository: str, reference: str) -> Descriptor | None:
        """The manifest `reference` (tag or digest) names; None when absent."""
        path = f"/v2/{repository}/manifests/{reference}"
        response = self._send("HEAD", path, _pull(repository), headers={"Accept": ACCEPT})
        if response.status_code == 404:
            return None
        digest = response.headers.get("Docker-Content-Digest")
        if not digest:
            manifest = self.get_manifest(repository, reference)
            return None if manifest is None else _descriptor(manifest)
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        return Descriptor(digest, media_type, int(response.headers.get("Content-Length") or 0))

    def get_manifest(self, repository: str, reference: str) -> Manifest | None:
        path = f"/v2/{repository}/manifests/{reference}"
        response = self._send("GET", path, _pull(repository), headers={"Accept": ACCEPT})
        if response.status_code == 404:
            return None
        body = response.content
        digest = sha256_digest(body)
        if reference.startswith("sha256:") and digest != reference:
            raise PermanentProviderError(
                f"registry {self.host} served {repository}@{reference} with digest {digest}"
            )
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        return Manifest(body, media_type, digest)

    def put_manifest(self, repository: str, reference: str, manifest: Manifest) -> str:
        path = f"/v2/{repository}/manifests/{reference}"
        response = self._send(
            "PUT",
            path,
            _push(repository),
            headers={"Content-Type": manifest.kind},
            data=manifest.body,
        )
        return response.headers.get("Docker-Content-Digest") or manifest.digest

    def delete_manifest(self, repository: str, reference: str) -> bool:
        """Delete by digest (or by tag where the registry supports it); False when absent."""
        path = f"/v2/{repository}/manifests/{reference}"
        response = self._send("DELETE", path, _delete(repository))
        return response.status_code != 404

    def delete_tag(self, repository: str, tag: str) -> bool:
        """Delete a tag alone (OCI 1.1); False when the registry cannot (distribution 2.x
        answers 400 UNSUPPORTED or 405: it deletes manifests by digest only)."""
        path = f"/v2/{repository}/manifests/{tag}"
        response = self._send("DELETE", path, _delete(repository), accept=(400, 404, 405))
        return response.status_code < 300

    # blobs -------------------------------------------------------------------------------

    def blob_exists(self, repository: str, digest: str) -> bool:
        response = self._send("HEAD", f"/v2/{repository}/blobs/{digest}", _pull(repository))
        return response.status_code != 404

    def get_blob(self, repository: str, digest: str) -> bytes | None:
        response = self._send("GET", f"/v2/{repository}/blobs/{digest}", _pull(repository))
        if response.status_code == 404:
            return None
        body = response.content
        if sha256_digest(body) != digest:
            raise PermanentProviderError(f"blob {digest} of {repository} has other content")
        return body

    def delete_blob(self, repository: str, digest: str) -> bool:
        """Delete blob `digest` of `repository`; False when absent."""
        path = f"/v2/{repository}/blobs/{digest}"
        response = self._send("DELETE", path, _delete(repository))
        return response.status_code != 404

    def copy_blob(self, source: str, target: str, digest: str) -> str:
        """Make blob `digest` of `source` present in `target`: "present", "mounted" or
        "uploaded" (when the registry declines the cross-repository mount)."""
        if self.blob_exists(target, digest):
            return "present"
        response = self._send(
            "POST",
            f"/v2/{target}/blobs/uploads/",
            _push(target),
            params={"mount": digest, "from": source},
            extra_scopes=[f"repository:{source}:pull"],
        )
        if response.status_code == 201:
            return "mounted"
        with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY) as spool:
            self._download(source, digest, spool)
            spool.seek(0)
            self._finish_upload(target, digest, spool, _location(response))
        return "uploaded"

    def upload_blob(self, repository: str, data: bytes) -> str:
        digest = sha256_digest(data)
        if not self.blob_exists(repository, digest):
            response = self._send("POST", f"/v2/{repository}/blobs/uploads/", _push(repository))
            self._finish_upload(repository, digest, data, _location(response))
        return digest

    def _download(self, repository: str, digest: str, into: IO[bytes]) -> None:
        path = f"/v2/{repository}/blobs/{digest}"
        response = self._send("GET", path, _pull(repository), stream=True)
        if response.status_code == 404:
            raise PermanentProviderError(f"blob {digest} is missing from {repository}")
        hasher = hashlib.sha256()
        with response:
            for chunk in response.iter_content(CHUNK):
                hasher.update(chunk)
                into.write(chunk)
        if "sha256:" + hasher.hexdigest() != digest:
            raise PermanentProviderError(f"blob {digest} of {repository} has other content")

    def _finish_upload(
        self, repository: str, digest: str, data: bytes | IO[bytes], location: str
    ) -> None:
        separator = "&" if "?" in location else "?"
        self._send(
            "PUT",
            f"{location}{separator}digest={digest}",
            _push(repository),
            headers={"Content-Type": "application/octet-stream"},
            data=data,
        )

    # listings ----------------------------------------------------------------------------

    def repositories(self) -> Iterator[str]:
        for page in self._pages("/v2/_catalog", "registry:catalog:*"):
            yield from page.get("repositories") or []

    def tags(self, repository: str) -> Iterator[str]:
        for page in self._pages(f"/v2/{repository}/tags/list", _pull(repository), missing_ok=True):
            yield from page.get("tags") or []

    def _pages(self, path: str, key: str, missing_ok: bool = False) -> Iterator[dict[str, Any]]:
        url: str | None = path
        params: dict[str, Any] | None = {"n": PAGE_SIZE}
        while url:
            response = self._send("GET", url, key, params=params)
            if response.status_code == 404:
                if missing_ok:
                    return
                raise PermanentProviderError(f"registry {self.host} has no {path} endpoint")
            yield response.json()
            following = response.links.get("next", {}).get("url")
            url, params = (following, None) if following else (None, None)

    # transport ---------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        key: str,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        data: bytes | IO[bytes] | None = None,
        extra_scopes: list[str] | None = None,
        stream: bool = False,
        accept: tuple[int, ...] = (404,),
    ) -> requests.Response:
        """Send with authorization, answering one challenge; raise on failure statuses
        except those in `accept`."""
        url = urljoin(self.base + "/", path.lstrip("/")) if not path.startswith("http") else path
        start = data.tell() if data is not None and not isinstance(data, bytes) else 0
        for attempt in range(2):
            sent = dict(headers or {})
            authorization = self.auth.authorization(key)
            if authorization:
                sent["Authorization"] = authorization
            if data is not None and not isinstance(data, bytes):
                data.seek(start)
            try:
                response = self.session.request(
                    method,
                    url,
                    headers=sent,
                    params=params,
                    data=data,
                    stream=stream,
                    timeout=self.timeout,
                    allow_redirects=True,
                )
            except requests.RequestException as exc:
                raise TransientProviderError(
                    f"cannot reach registry {self.host}: {type(exc).__name__}"
                ) from None
            if response.status_code != 401 or attempt:
                break
            challenge = response.headers.get("WWW-Authenticate", "")
            response.close()
            if not self.auth.challenged(key, challenge, self._fetch_token, extra_scopes or []):
                break
        if response.status_code < 400 or response.status_code in accept:
            return response
        raise _error(response, method, path.split("?")[0], self.host)

    def _fetch_token(
        self, realm: str, params: list[tuple[str, str]], basic: str | None
    ) -> dict[str, Any]:
        try:
            response = self.session.get(
                realm,
                params=params,
                headers={"Authorization": basic} if basic else {},
                timeout=self.timeout,
            )
        except requests.RequestException as exc:
            raise TransientProviderError(
                f"cannot reach the token service of registry {self.host}: {type(exc).__name__}"
            ) from None
        if response.status_code >= 400:
            raise _error(response, "GET", "the token service", self.host)
        try:
            answer: dict[str, Any] = response.json()
        except ValueError:
            raise PermanentProviderError(
                f"the token service of registry {self.host} answered with no JSON"
            ) from None
        return answer


def _pull(repository: str) -> str:
    return f"repository:{repository}:pull"


def _push(repository: str) -> str:
    return f"repository:{repository}:push"


def _delete(repository: str) -> str:
    return f"repository:{repository}:delete"


def _location(response: requests.Response) -> str:
    location = response.headers.get("Location")
    if not location:
        raise PermanentProviderError("the registry started an upload without a Location")
    return location


def _descriptor(manifest: Manifest) -> Descriptor:
    return Descriptor(manifest.digest, manifest.kind, len(manifest.body))


def _registry_words(response: requests.Response) -> str:
    """The registry's own error codes and messages, or the start of its answer."""
    try:
        errors = response.json().get("errors") or []
        words = "; ".join(
            " ".join(str(part) for part in (e.get("code"), e.get("message")) if part)
            for e in errors
        )
    except (ValueError, AttributeError):
        words = ""
    # redacted before it is cut short, so no credential survives half-cut
    text = words or (response.text[:4000] if response.text else response.reason or "")
    return redact(text)[:200].strip()


def _error(
    response: requests.Response, method: str, what: str, host: str
) -> PermanentProviderError | TransientProviderError:
    status = response.status_code
    words = _registry_words(response)
    message = f"registry {host} answered {status} to {method} {what}" + (
        f": {words}" if words else ""
    )
    if status == 429 or status >= 500:
        retry_after = response.headers.get("Retry-After")
        delay = float(retry_after) if retry_after and retry_after.isdigit() else None
        return TransientProviderError(message, retry_after=delay)
    if status in (401, 403):
        return PermanentProviderError(
            f"access denied: {message}; check the credentials named by the registry "
            "provider's usernameEnv/passwordEnv and their permissions"
        )
    return PermanentProviderError(message)
