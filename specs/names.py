"""Name grammars of the systems trainform writes to, as pydantic string types.

A resource name must be valid everywhere it lands: a Kubernetes namespace or object name
(DNS-1123 label), a Slurm account, partition or QOS (Slurm lowercases names and reserves a
few), an S3 key prefix and a label value. Patterns run inside pydantic-core; `PATTERN_HELP`
turns a pattern mismatch into words a user understands.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import StringConstraints

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
SHA256_DIGEST = r"^sha256:[a-f0-9]{64}$"
GIT_COMMIT = r"^([a-f0-9]{40}|[a-f0-9]{64})$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
VERSION_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"

PATTERN_HELP: dict[str, str] = {
    DNS1123_LABEL: "a DNS-1123 label: lowercase letters, digits and '-', starting and "
    "ending with a letter or digit, at most 63 characters",
    LABEL_KEY: "a Kubernetes label key: optional DNS prefix and '/', then up to 63 "
    "letters, digits, '-', '_' or '.'",
    LABEL_VALUE: "a Kubernetes label value: up to 63 letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit",
    SHA256_DIGEST: "a digest 'sha256:' followed by 64 lowercase hex digits",
    GIT_COMMIT: "a full commit id (40 or 64 lowercase hex digits)",
    ENV_NAME: "an environment variable name: letters, digits and '_', not starting with a digit",
    VERSION_NAME: "a version name: letters, digits, '.', '_' or '-', at most 63 characters",
}

ResourceName = Annotated[str, StringConstraints(pattern=DNS1123_LABEL, max_length=63)]
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=317)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE, max_length=63)]
Sha256Digest = Annotated[str, StringConstraints(pattern=SHA256_DIGEST)]
GitCommit = Annotated[str, StringConstraints(pattern=GIT_COMMIT)]
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME, max_length=255)]
VersionName = Annotated[str, StringConstraints(pattern=VERSION_NAME, max_length=63)]

# Slurm treats these case-insensitively as keywords in slurm.conf and sacctmgr.
SLURM_RESERVED = frozenset({"default", "all", "none", "root"})

_OCI_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_OCI_DOMAIN = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
)
OCI_REFERENCE = re.compile(
    rf"^(?:(?P<registry>{_OCI_DOMAIN})/)?"
    rf"(?P<repository>{_OCI_COMPONENT}(?:/{_OCI_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)
OCI_REFERENCE_HELP = (
    "an OCI image reference: [registry[:port]/]repository[:tag][@sha256:<64 hex>], "
    "repository path components in lowercase letters, digits and separators . _ __ -"
)

_S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IPV4 = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


def split_image_reference(text: str) -> dict[str, str | None]:
    """Registry, repository, tag and digest of an OCI reference; ValueError if malformed.

    The first path component is a registry only when it looks like a host (has '.' or
    ':' or is `localhost`), as the distribution reference grammar says.
    """
    match = OCI_REFERENCE.match(text)
    if not match:
        raise ValueError(OCI_REFERENCE_HELP)
    registry, repository = match["registry"], match["repository"]
    if registry and not ("." in registry or ":" in registry or registry == "localhost"):
        if registry != registry.lower():
            raise ValueError(OCI_REFERENCE_HELP)
        repository = f"{registry}/{repository}"
        registry = None
    if len(repository) > 255:
        raise ValueError("OCI repository names are at most 255 characters")
    return {
        "registry": registry,
        "repository": repository,
        "tag": match["tag"],
        "digest": match["digest"],
    }


def check_s3_uri(uri: str) -> None:
    """Raise ValueError unless `uri` is s3://bucket[/key] with a valid bucket and key."""
    rest = uri[len("s3://") :]
    bucket, _, key = rest.partition("/")
    if not _S3_BUCKET.match(bucket) or ".." in bucket or _IPV4.match(bucket):
        raise ValueError(
            f"bucket {bucket!r} is not a valid S3 bucket name (3-63 lowercase letters, digits, "
            "'.' or '-', starting and ending with a letter or digit, not an IP address)"
        )
    if len(key.encode("utf-8")) > 1024:
        raise ValueError("S3 keys are at most 1024 bytes")
    if any(ord(ch) < 32 for ch in key):
        raise ValueError("S3 keys must not contain control characters")


def check_storage_uri(uri: str) -> None:
    """Raise ValueError unless `uri` is an s3:// URI, a file:// URI or a relative path."""
    if uri.startswith("s3://"):
        check_s3_uri(uri)
    elif uri.startswith("file://"):
        if len(uri) == len("file://"):
            raise ValueError("file:// URI without a path")
    elif "://" in uri:
        scheme = uri.split("://", 1)[0]
        raise ValueError(f"unsupported scheme {scheme!r}: expected s3://, file:// or a path")
    elif not uri:
        raise ValueError("empty storage location")
