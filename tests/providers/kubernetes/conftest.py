"""Fixtures of the kubernetes provider's tests: the session's trainer image (fixtures.py)."""

from tests.providers.kubernetes.fixtures import trainer

__all__ = ["trainer"]
