"""Registry authentication: Basic credentials and the Bearer token flow of the distribution
spec (https://distribution.github.io/distribution/spec/auth/token/).

The client calls `Authenticator.authorization()` before each request and `challenged()`
after a 401. Credentials come from environment variables named in trainform.yaml; their
values never appear in a repr, an error message or an output. Tokens are cached per scope
until shortly before they expire.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from trainform.providers.errors import PermanentProviderError, ProviderConfigError
from trainform.specs.secrets import register_credential, register_secret

TOKEN_MARGIN_SECONDS = 10.0
DEFAULT_TOKEN_LIFETIME = 60.0
_PARAMETER = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([^\s,]+))')


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        # a server or token service that echoes them, in any encoding, gets redacted
        register_credential(self.username, self.password)

    def __repr__(self) -> str:
        return f"Credentials(username={self.username!r}, password=<hidden>)"

    def basic(self) -> str:
        pair = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


def credentials_from_env(username_env: str | None, password_env: str | None) -> Credentials | None:
    """The credentials the connection names, or None when it names none."""
    if not username_env and not password_env:
        return None
    missing = [name for name in (username_env, password_env) if name and name not in os.environ]
    if missing:
        raise ProviderConfigError(
            f"cannot read registry credentials: environment variable {', '.join(missing)} "
            "is not set"
        )
    username = os.environ[username_env] if username_env else ""
    password = os.environ[password_env] if password_env else ""
    return Credentials(username, password)


@dataclass(frozen=True)
class Challenge:
    """A parsed `WWW-Authenticate` header."""

    scheme: str
    parameters: dict[str, str]


def parse_challenge(header: str) -> Challenge:
    scheme, _, rest = header.strip().partition(" ")
    parameters = {
        m[1].lower(): m[2] if m[2] is not None else m[3] for m in _PARAMETER.finditer(rest)
    }
    return Challenge(scheme.lower(), parameters)


@dataclass
class _Token:
    value: str
    expires_at: float


class Authenticator:
    """Chooses the Authorization header for a request and answers challenges.

    `fetch_token(realm, params, authorization)` is the client's GET of the token endpoint;
    it returns the decoded JSON answer.
    """

    def __init__(self, credentials: Credentials | None) -> None:
        self.credentials = credentials
        self._basic = False
        self._tokens: dict[str, _Token] = {}
        self._scope_of: dict[str, str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Authenticator(credentials={self.credentials!r}, tokens={len(self._tokens)})"

    def authorization(self, key: str) -> str | None:
        """The header for a request in the access class `key` (repository and verb)."""
        with self._lock:
            scope = self._scope_of.get(key)
            token = self._tokens.get(scope) if scope is not None else None
            if token is not None and token.expires_at > time.monotonic():
                return f"Bearer {token.value}"
            if self._basic and self.credentials is not None:
                return self.credentials.basic()
        return None

    def challenged(self, key: str, header: str, fetch_token: Any, extra_scopes: list[str]) -> bool:
        """Learn from a 401; True when a retry can carry new authorization."""
        challenge = parse_challenge(header) if header else Challenge("", {})
        if challenge.scheme == "basic":
            if self.credentials is None or self._basic:
                return False
            self._basic = True
            return True
        if challenge.scheme != "bearer" or "realm" not in challenge.parameters:
            return False
        scopes = [challenge.parameters[s] for s in ("scope",) if s in challenge.parameters]
        scopes += [s for s in extra_scopes if s not in scopes]
        scope = " ".join(scopes)
        with self._lock:
            known = self._tokens.get(scope)
            if known is not None and known.expires_at > time.monotonic():
                if self._scope_of.get(key) == scope:
                    # the token was sent and refused: it grants less than this request needs
                    del self._tokens[scope]
                    return False
                self._scope_of[key] = scope
                return True
        params: list[tuple[str, str]] = [("scope", s) for s in scopes]
        if "service" in challenge.parameters:
            params.insert(0, ("service", challenge.parameters["service"]))
        basic = self.credentials.basic() if self.credentials is not None else None
        answer = fetch_token(challenge.parameters["realm"], params, basic)
        value = answer.get("token") or answer.get("access_token")
        if not isinstance(value, str) or not value:
            raise PermanentProviderError("the registry's token service answered without a token")
        register_secret(value)
        lifetime = float(answer.get("expires_in") or DEFAULT_TOKEN_LIFETIME)
        with self._lock:
            self._tokens[scope] = _Token(value, time.monotonic() + lifetime - TOKEN_MARGIN_SECONDS)
            self._scope_of[key] = scope
        return True
