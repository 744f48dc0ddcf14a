"""Image policies: images pinned by digest, and images only from allowed registries."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping
from typing import Any

from trainform.planner.lockfile import LockFile
from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.context import PolicyContext
from trainform.policies.findings import Severity
from trainform.specs.names import split_image_reference


def _locked_images(context: PolicyContext) -> set[str]:
    try:
        lock = LockFile.read(context.specs.root)
    except Exception:  # noqa: BLE001 - an unreadable lock pins nothing; plan reports it
        return set()
    return {address for address, entry in (lock.images if lock else {}).items() if entry}


def check_pinned(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    locked = _locked_images(context) if params.get("acceptLock") else set()
    for image in context.of_kind("Image"):
        spec = image.spec
        if spec.get("runtime") == "host" or image.address in locked:
            continue
        reference = spec.get("reference") or ""
        if not split_image_reference(reference)["digest"]:
            yield Violation(
                image.address,
                ("spec", "reference"),
                f"image {reference} is not pinned by digest: append @sha256:<digest> "
                "(or record it with `trainform lock`)",
                key="unpinned",
            )


def check_registries(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    allowed = [str(pattern) for pattern in params.get("registries") or []]
    if not allowed:
        return
    for image in context.of_kind("Image"):
        reference = image.spec.get("reference")
        if not reference:
            continue
        registry = split_image_reference(reference)["registry"] or "docker.io"
        if not any(fnmatch.fnmatchcase(registry, pattern) for pattern in allowed):
            yield Violation(
                image.address,
                ("spec", "reference"),
                f"registry {registry} is not allowed (allowed: {', '.join(allowed)})",
                key=registry,
            )


IMAGE_PINNED = BuiltinPolicy(
    id="image-pinned",
    name="Images pinned by digest",
    severity=Severity.DENY,
    kinds=("Image",),
    check=check_pinned,
    parameters={"acceptLock": True},
    description="An Image reference carries @sha256:<digest> (or trainform.lock records its "
    "digest, with acceptLock), unless it is the host runtime.",
)

ALLOWED_REGISTRIES = BuiltinPolicy(
    id="allowed-registries",
    name="Images only from allowed registries",
    severity=Severity.DENY,
    kinds=("Image",),
    check=check_registries,
    parameters={"registries": []},
    description="An Image reference's registry host matches one of `registries` (globs); "
    "an empty list allows every registry. A reference without a host is docker.io.",
)
