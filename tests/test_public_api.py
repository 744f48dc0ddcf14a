"""The public API of `specs` is curated: what `__all__` lists, and nothing changes silently."""

from __future__ import annotations

import trainform.specs as specs

SPECS_API = [
    "KINDS",
    "Dependency",
    "Diagnostic",
    "Duration",
    "Location",
    "Quantity",
    "Resource",
    "RootConfig",
    "Severity",
    "SpecError",
    "SpecLoadError",
    "SpecSet",
    "SpecUsageError",
    "load_specs",
]


def test_specs_exports_exactly_its_public_api() -> None:
    assert sorted(specs.__all__) == sorted(SPECS_API)
    assert len(specs.__all__) == len(set(specs.__all__))


def test_every_export_exists() -> None:
    for name in specs.__all__:
        assert getattr(specs, name, None) is not None, name


def test_module_docstring_lists_the_public_api() -> None:
    assert specs.__doc__ is not None
    for name in SPECS_API:
        assert f"`{name}`" in specs.__doc__, name


def test_errors_share_one_root() -> None:
    for name in ("SpecLoadError", "SpecUsageError"):
        assert issubclass(getattr(specs, name), specs.SpecError)


def test_kinds_lists_every_spec_kind() -> None:
    assert list(specs.KINDS) == [
        "Project",
        "ResourcePool",
        "Queue",
        "Quota",
        "Dataset",
        "Image",
        "TrainingJob",
        "EvalSuite",
        "ModelRelease",
    ]
