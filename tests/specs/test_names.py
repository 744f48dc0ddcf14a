"""Name grammars: DNS-1123 resource names, OCI image references, S3 URIs."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError
from trainform.specs.names import (
    ResourceName,
    check_s3_uri,
    check_storage_uri,
    split_image_reference,
)

DIGEST = "sha256:" + "0123456789abcdef" * 4


class _Named(BaseModel):
    name: ResourceName


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a", id="one-letter"),
        pytest.param("0", id="one-digit"),
        pytest.param("research-team-2", id="hyphens"),
        pytest.param("a" * 63, id="63-characters"),
    ],
)
def test_dns1123_label_is_a_valid_name(name: str) -> None:
    assert _Named(name=name).name == name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("Research", id="uppercase"),
        pytest.param("-team", id="leading-hyphen"),
        pytest.param("team-", id="trailing-hyphen"),
        pytest.param("team_a", id="underscore"),
        pytest.param("team.a", id="dot"),
        pytest.param("", id="empty"),
        pytest.param("a" * 64, id="64-characters"),
        pytest.param("équipe", id="non-ascii"),
    ],
)
def test_name_outside_dns1123_is_rejected(name: str) -> None:
    with pytest.raises(ValidationError):
        _Named(name=name)


@pytest.mark.parametrize(
    ("reference", "parts"),
    [
        pytest.param(
            "registry.example.com:5000/team/trainer:v1",
            ("registry.example.com:5000", "team/trainer", "v1", None),
            id="registry-with-port",
        ),
        pytest.param(
            "localhost:5000/trainer:1.0",
            ("localhost:5000", "trainer", "1.0", None),
            id="localhost-with-port",
        ),
        pytest.param(
            "localhost/trainer:1.0", ("localhost", "trainer", "1.0", None), id="bare-localhost"
        ),
        pytest.param(f"trainer@{DIGEST}", (None, "trainer", None, DIGEST), id="digest-only"),
        pytest.param(
            f"ghcr.io/org/trainer:v2@{DIGEST}",
            ("ghcr.io", "org/trainer", "v2", DIGEST),
            id="tag-and-digest",
        ),
        pytest.param(
            "team/trainer:v1", (None, "team/trainer", "v1", None), id="first-component-not-a-host"
        ),
        pytest.param("ubuntu", (None, "ubuntu", None, None), id="repository-only"),
        pytest.param(
            "my_org/x__y.z-w:latest",
            (None, "my_org/x__y.z-w", "latest", None),
            id="separators",
        ),
        pytest.param(
            "[::1]:5000/trainer:v1", ("[::1]:5000", "trainer", "v1", None), id="ipv6-registry"
        ),
    ],
)
def test_image_reference_splits_into_registry_repository_tag_digest(
    reference: str, parts: tuple[str | None, ...]
) -> None:
    split = split_image_reference(reference)
    assert (split["registry"], split["repository"], split["tag"], split["digest"]) == parts


@pytest.mark.parametrize(
    "reference",
    [
        pytest.param("Team/trainer:v1", id="uppercase-first-component"),
        pytest.param("ghcr.io/Org/trainer:v1", id="uppercase-repository"),
        pytest.param("trainer:v1@sha256:abc", id="short-digest"),
        pytest.param("trainer@sha512:" + "a" * 128, id="unsupported-digest-algorithm"),
        pytest.param("trainer:-bad", id="tag-starts-with-hyphen"),
        pytest.param("trainer:" + "a" * 129, id="tag-too-long"),
        pytest.param("a" * 256 + ":v1", id="repository-too-long"),
        pytest.param("trainer v1", id="space"),
        pytest.param("", id="empty"),
        pytest.param("https://ghcr.io/org/trainer:v1", id="url-scheme"),
    ],
)
def test_malformed_image_reference_is_rejected(reference: str) -> None:
    with pytest.raises(ValueError):
        split_image_reference(reference)


@pytest.mark.parametrize(
    "uri",
    [
        pytest.param("s3://ml-data/corpus/v1", id="bucket-and-key"),
        pytest.param("s3://ml-data", id="bucket-only"),
        pytest.param("s3://abc", id="three-character-bucket"),
        pytest.param("s3://my.data.bucket/key", id="dotted-bucket"),
    ],
)
def test_valid_s3_uri_is_accepted(uri: str) -> None:
    check_s3_uri(uri)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        pytest.param("s3://ab/key", "not a valid S3 bucket name", id="bucket-too-short"),
        pytest.param("s3://" + "a" * 64, "not a valid S3 bucket name", id="bucket-too-long"),
        pytest.param("s3://ML-Data/key", "not a valid S3 bucket name", id="uppercase-bucket"),
        pytest.param("s3://192.168.1.10/key", "not an IP address", id="ip-address-bucket"),
        pytest.param("s3://a..b/key", "not a valid S3 bucket name", id="double-dot-bucket"),
        pytest.param("s3://-bucket/key", "not a valid S3 bucket name", id="leading-hyphen"),
        pytest.param("s3://bucket/" + "k" * 1025, "at most 1024 bytes", id="key-too-long"),
        pytest.param("s3://bucket/a\x01b", "control characters", id="control-character"),
    ],
)
def test_invalid_s3_uri_is_rejected_with_a_reason(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_s3_uri(uri)


@pytest.mark.parametrize(
    "uri",
    [
        pytest.param("s3://ml-data/corpus", id="s3"),
        pytest.param("file:///srv/data", id="file"),
        pytest.param("data/tiny-corpus", id="relative-path"),
    ],
)
def test_storage_location_accepts_s3_file_and_paths(uri: str) -> None:
    check_storage_uri(uri)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        pytest.param("gs://bucket/x", "unsupported scheme 'gs'", id="other-scheme"),
        pytest.param("file://", "without a path", id="file-without-path"),
        pytest.param("", "empty", id="empty"),
        pytest.param("s3://x/key", "bucket 'x'", id="bad-s3-bucket"),
    ],
)
def test_storage_location_rejects_unsupported_uris(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_storage_uri(uri)
