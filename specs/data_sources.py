"""Validate-time checks of where dataset data and job checkpoints live on this machine.

Called by the loader once every document validated. Each Dataset's `spec.source` must
stay, real path and symlinks followed, under the spec root; a `file:///` source must fall
under a data root that trainform.yaml declares (`security.dataRoots`), and a bare absolute
path is refused outright. A relative source that trainform.yaml's `storage.datasets`
places under a base stays under that base. Each version folder (`path`, default its name)
stays under its dataset's source folder. A TrainingJob's checkpoint `prefix` never climbs
with `..` and names a host folder only under a data root. s3:// locations are checked as
text only: nothing is looked up on disk for them. Every refusal is a `path-escape`
diagnostic at the field's file:line:column.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from trainform.specs.confinement import FILE_SCHEME, PathEscape, confined_path, real_path
from trainform.specs.errors import Diagnostic, Location, Severity
from trainform.specs.models.config import RootConfig
from trainform.specs.resource import Resource
from trainform.specs.validation import format_path

CODE = "path-escape"
EXPECTED_SOURCE = (
    "s3://bucket/prefix, a path inside the spec folder, or file:///path under a data root "
    "declared in trainform.yaml (security.dataRoots)"
)

Locate = Callable[[Resource, tuple[str | int, ...]], Location]


def trusted_data_roots(config: RootConfig) -> tuple[str, ...]:
    """Host folders besides the spec folder that a placed dataset source may be under:
    security.dataRoots, and the storage.datasets base when it is a file:// one."""
    base = config.storage.datasets
    extra = (base,) if base.startswith(FILE_SCHEME) else ()
    return (*config.security.data_roots, *extra)


def check_data_sources(
    resources: dict[str, Resource],
    config: RootConfig,
    root: Path,
    locate: Locate,
) -> list[Diagnostic]:
    """One diagnostic per dataset source, version folder or checkpoint prefix that escapes."""
    diagnostics: list[Diagnostic] = []
    try:
        real_root: Path | None = real_path(root)
    except PathEscape:
        real_root = None  # each local source then says why, resolving the root itself
    for resource in resources.values():
        if resource.kind == "Dataset":
            diagnostics += _check_dataset(resource, config, root, real_root, locate)
        elif resource.kind == "TrainingJob":
            diagnostic = _check_checkpoints(resource, config, root, locate)
            if diagnostic is not None:
                diagnostics.append(diagnostic)
    return diagnostics


def _escape(
    resource: Resource,
    locate: Locate,
    path: tuple[str | int, ...],
    summary: str,
    found: str,
    detail: str,
    expected: str = EXPECTED_SOURCE,
) -> Diagnostic:
    return Diagnostic(
        Severity.ERROR,
        CODE,
        summary,
        locate(resource, path),
        field=format_path(path),
        expected=expected,
        found=found,
        address=resource.address,
        detail=detail,
    )


def _climbs(text: str) -> bool:
    return ".." in PurePosixPath(text).parts


def _source_folder(
    source: str, config: RootConfig, root: Path, real_root: Path | None
) -> Path | None:
    """The real folder of a local dataset source; None for data on S3; PathEscape if it
    leaves every root it may live under."""
    if source.startswith("s3://"):
        return None
    data_roots = config.security.data_roots
    if source.startswith(FILE_SCHEME):
        return confined_path(root, source, data_roots, allow_absolute=True)
    if source.startswith("/"):
        raise PathEscape(
            f"{source!r} is an absolute path; name a folder inside the spec folder, or "
            "write file:///path under a data root declared in trainform.yaml "
            "(security.dataRoots)"
        )
    base = config.storage.datasets
    if base.startswith("s3://"):
        if _climbs(source):
            raise PathEscape(f"{source!r} climbs out of the storage.datasets base {base}")
        return None
    if base.startswith(FILE_SCHEME):
        return confined_path(
            base.removeprefix(FILE_SCHEME), source, within=f"the storage.datasets base {base}"
        )
    if real_root is not None:
        return confined_path(real_root, source, root_is_real=True)
    return confined_path(root, source)


def _check_dataset(
    resource: Resource, config: RootConfig, root: Path, real_root: Path | None, locate: Locate
) -> list[Diagnostic]:
    spec: Any = resource.document.spec  # type: ignore[attr-defined]
    source: str = spec.source
    try:
        folder = _source_folder(source, config, root, real_root)
    except PathEscape as exc:
        return [
            _escape(
                resource,
                locate,
                ("spec", "source"),
                f"dataset source {source!r} leaves the places a spec may read",
                source,
                str(exc),
            )
        ]
    if folder is None:
        return []
    diagnostics = []
    links = _links_in(folder)
    for index, version in enumerate(spec.versions):
        relative = version.path or version.name
        if _plain_entry(relative, links):
            continue  # folder/relative is its own real path, inside the real folder
        try:
            confined_path(folder, relative, within="the dataset's source folder", root_is_real=True)
        except PathEscape as exc:
            field = "path" if version.path else "name"
            diagnostics.append(
                _escape(
                    resource,
                    locate,
                    ("spec", "versions", index, field),
                    f"version {version.name} of the dataset leaves its source folder",
                    relative,
                    str(exc),
                    expected=f"a folder inside {source}",
                )
            )
    return diagnostics


def _links_in(folder: Path) -> set[str] | None:
    """Names of the symbolic links directly in `folder` (empty when it does not exist);
    None when it cannot be listed."""
    try:
        with os.scandir(folder) as listing:
            return {entry.name for entry in listing if entry.is_symlink()}
    except FileNotFoundError:
        return set()
    except OSError:
        return None


def _plain_entry(relative: str, links: set[str] | None) -> bool:
    """Whether `relative` is one name in the listed folder that is not a link, so that no
    resolution can take it elsewhere."""
    return (
        links is not None
        and relative not in links
        and relative not in ("", ".", "..")
        and "/" not in relative
        and "\x00" not in relative
    )


def _check_checkpoints(
    resource: Resource, config: RootConfig, root: Path, locate: Locate
) -> Diagnostic | None:
    checkpoint = getattr(resource.document.spec, "checkpoint", None)  # type: ignore[attr-defined]
    prefix: str = checkpoint.prefix if checkpoint is not None else ""
    if not prefix or prefix.startswith("s3://"):
        return None
    try:
        if _climbs(prefix.removeprefix(FILE_SCHEME)):
            raise PathEscape(f"{prefix!r} climbs out of its storage root with '..'")
        if prefix.startswith((FILE_SCHEME, "/")):
            confined_path(root, prefix, config.security.data_roots, allow_absolute=True)
        elif "\x00" in prefix:
            raise PathEscape("contains a NUL byte")
    except PathEscape as exc:
        return _escape(
            resource,
            locate,
            ("spec", "checkpoint", "prefix"),
            f"checkpoint prefix {prefix!r} leaves the job's storage",
            prefix,
            str(exc),
            expected="s3://bucket/prefix, a relative prefix without '..' (under "
            "storage.checkpoints or the provider's own storage), or file:///path under a "
            "data root declared in trainform.yaml (security.dataRoots)",
        )
    return None
