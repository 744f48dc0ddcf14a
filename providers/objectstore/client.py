"""An S3 client built from an `objectstore` connection, and S3 errors as provider errors.

Credentials never come from specs or state: boto3's own chain reads them (environment,
shared files, a named `profile`, instance metadata), and the client registers what it read
(`register_credential`) so an endpoint's echo of the secret key is redacted in any encoding.
A read that fails is an error, never "missing": only a 404 for the very object asked about
means absent, and callers decide that themselves from `is_not_found`.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.errors import (
    PermanentProviderError,
    ProviderConfigError,
    ProviderError,
    TransientProviderError,
)
from trainform.specs.secrets import register_credential, register_secret

NOT_FOUND_CODES = {"404", "NoSuchKey", "NoSuchBucket", "NotFound", "NoSuchVersion"}
PRECONDITION_CODES = {"412", "PreconditionFailed", "ConditionalRequestConflict"}
TRANSIENT_CODES = {
    "500",
    "502",
    "503",
    "504",
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "Throttling",
    "ThrottlingException",
}


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key prefix without leading or trailing '/') of `s3://bucket/prefix`."""
    if not uri.startswith("s3://"):
        raise ValueError(f"{uri} is not an s3:// URI")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    return bucket, prefix.strip("/")


def join_key(*parts: str) -> str:
    return "/".join(part.strip("/") for part in parts if part.strip("/"))


def make_client(
    connection: Any = None,
    *,
    max_attempts: int = 3,
    timeout: float = 10.0,
    read_timeout: float | None = None,
) -> Any:
    """A boto3 S3 client for the connection (ObjectStoreConnection or None for defaults)."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    endpoint = _setting(connection, "endpoint_url") or None
    region = _setting(connection, "region") or None
    profile = _setting(connection, "profile") or None
    style = _setting(connection, "addressing_style") or "auto"
    config = Config(
        s3={"addressing_style": style},
        retries={"max_attempts": max_attempts, "mode": "standard"},
        connect_timeout=timeout,
        max_pool_connections=32,
        read_timeout=read_timeout if read_timeout is not None else timeout * 3,
        # Checksums on every request would make SHA/CRC trailers mandatory, which many
        # S3-compatible servers do not implement; ETags are what trainform compares.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
        client = session.client("s3", endpoint_url=endpoint, config=config)
        _register_credentials(session)
        return client
    except ProfileNotFound:
        raise ProviderConfigError(f"credentials profile `{profile}` is not configured") from None
    except BotoCoreError as exc:
        raise ProviderConfigError(f"cannot create an S3 client: {exc}") from None


def _register_credentials(session: Any) -> None:
    """Register the keys the session resolved (creating the client resolved them: no new
    lookup) for redaction: the secret key with its access key id, and a session token."""
    from botocore.exceptions import BotoCoreError

    try:
        credentials = session.get_credentials()
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
    except BotoCoreError:  # a refresh that fails fails the first request, in its own words
        return
    if frozen is None:
        return
    register_credential(frozen.access_key, frozen.secret_key)
    register_secret(frozen.token)


def _setting(connection: Any, name: str) -> str:
    """A connection field from an ObjectStoreConnection or its JSON form (a dict)."""
    if isinstance(connection, dict):
        return str(connection.get(name) or "")
    return str(getattr(connection, name, "") or "")


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code or (str(status) if status else "")


def is_not_found(exc: BaseException) -> bool:
    return error_code(exc) in NOT_FOUND_CODES


def is_precondition_failed(exc: BaseException) -> bool:
    return error_code(exc) in PRECONDITION_CODES


def provider_error(exc: BaseException, doing: str) -> ProviderError:
    """The provider error for a failed S3 call, in the endpoint's own words."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, NoCredentialsError):
        return ProviderConfigError(
            f"{doing}: no S3 credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "AWS_PROFILE or the connection's profile)"
        )
    if isinstance(exc, EndpointConnectionError | ConnectionClosedError | ReadTimeoutError):
        return TransientProviderError(f"{doing}: the S3 endpoint is unreachable ({exc})")
    if isinstance(exc, ClientError):
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message", "") or str(exc)
        text = f"{doing}: {code}: {message}"
        if code in TRANSIENT_CODES:
            return TransientProviderError(text)
        return PermanentProviderError(text)
    return TransientProviderError(f"{doing}: {exc}")
