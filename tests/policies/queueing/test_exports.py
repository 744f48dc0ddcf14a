"""The public API of policies.queueing is curated: `__all__`, documented in the docstring."""

from __future__ import annotations

import trainform.policies.queueing as queueing

API = [
    "JobOutcome",
    "PlatformModel",
    "PoolQuota",
    "ProjectQuota",
    "QueueModel",
    "QueueingError",
    "Run",
    "SimulationResult",
    "TraceError",
    "TraceJob",
    "WaitStats",
    "platform_from_specs",
    "read_sacct",
    "read_trace",
    "simulate",
]


def test_queueing_exports_exactly_its_public_api() -> None:
    assert sorted(queueing.__all__) == sorted(API)
    for name in API:
        assert getattr(queueing, name, None) is not None, name
        assert f"`{name}`" in (queueing.__doc__ or ""), name


def test_trace_errors_share_the_package_root() -> None:
    assert issubclass(queueing.TraceError, queueing.QueueingError)
