"""Image references as the registry provider reads them: which registry, repository, tag and
digest a spec names, host names compared the same way everywhere, and the checks that need
no I/O (called from `validate`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from trainform.providers.oci.manifests import MARKER_SUFFIX, MAX_TAG_LENGTH
from trainform.specs.names import split_image_reference

DEFAULT_PORTS = {"http": "80", "https": "443"}


def normal_host(host: str, scheme: str = "https") -> str:
    """`host[:port]` in lower case, without the scheme's default port."""
    host = host.strip().lower().rstrip("/")
    name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    return name if port and port == DEFAULT_PORTS.get(scheme) else host


def url_host(url: str) -> tuple[str, str]:
    """(scheme, normalized host) of a registry base URL."""
    parts = urlsplit(url)
    return parts.scheme, normal_host(parts.netloc, parts.scheme)


@dataclass(frozen=True)
class ImageTarget:
    registry: str | None
    repository: str
    tag: str | None
    digest: str | None

    def name(self, digest: str | None = None) -> str:
        """`registry/repository[:tag][@digest]`, with `digest` in place of the pinned one."""
        text = f"{self.registry}/{self.repository}" if self.registry else self.repository
        if self.tag:
            text += f":{self.tag}"
        pinned = digest or self.digest
        return f"{text}@{pinned}" if pinned else text


def image_target(spec: dict[str, Any], scheme: str) -> ImageTarget:
    parts = split_image_reference(spec["reference"])
    registry = normal_host(parts["registry"], scheme) if parts["registry"] else None
    return ImageTarget(registry, str(parts["repository"]), parts["tag"], parts["digest"])


def reference_problems(
    spec: dict[str, Any], host: str, scheme: str, allowed: list[str], instance: str
) -> list[tuple[str, str]]:
    """(field, message) of everything wrong with an Image spec for this provider instance."""
    if spec.get("runtime", "container") != "container":
        return [("spec.runtime", "the registry provider serves `runtime: container` images only")]
    reference = spec.get("reference")
    if not reference:
        return [("spec.reference", "a registry image needs a reference")]
    try:
        target = image_target(spec, scheme)
    except ValueError as exc:
        return [("spec.reference", f"{reference}: {exc}")]
    problems = []
    if target.registry is None:
        problems.append(
            (
                "spec.reference",
                f"{reference} names no registry host; provider instance `{instance}` serves "
                f"{host}: write {host}/{reference}",
            )
        )
    elif allowed and target.registry not in allowed:
        problems.append(
            (
                "spec.reference",
                f"{reference}: registry {target.registry} is not allowed by provider instance "
                f"`{instance}` (allowed: {', '.join(allowed)})",
            )
        )
    elif target.registry != host:
        problems.append(
            (
                "spec.reference",
                f"{reference}: registry {target.registry} is not the one provider instance "
                f"`{instance}` serves ({host}); use a provider instance for {target.registry}",
            )
        )
    if spec.get("promotedFrom"):
        if not target.tag:
            problems.append(
                ("spec.reference", f"{reference}: a promoted image needs a tag to promote to")
            )
        elif target.tag.endswith(MARKER_SUFFIX):
            problems.append(
                ("spec.reference", f"{reference}: tags ending in {MARKER_SUFFIX} are trainform's")
            )
        elif len(target.tag) + len(MARKER_SUFFIX) > MAX_TAG_LENGTH:
            problems.append(
                (
                    "spec.reference",
                    f"{reference}: a promoted tag has at most "
                    f"{MAX_TAG_LENGTH - len(MARKER_SUFFIX)} characters (room for its "
                    f"{MARKER_SUFFIX} ownership tag)",
                )
            )
    return problems
