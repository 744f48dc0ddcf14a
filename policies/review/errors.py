"""Errors of the pull-request review (`trainform review`).

Tree of errors raised by this package:

    ReviewError                 root: everything `policies.review` raises derives from it
    +-- GitRefError             a ref that does not name a commit, or git itself failed
    +-- TraceError              a job trace that cannot be read (file or provider accounting)

Spec problems at either ref are not wrapped: they stay `specs.SpecLoadError` with every
diagnostic, raised through `RefLoadError` so the caller knows which side failed.
"""

from __future__ import annotations

from trainform.specs import SpecLoadError


class ReviewError(Exception):
    """Root of every error raised by `policies.review`."""


class GitRefError(ReviewError):
    """A ref could not be read: unknown revision, not a repository, missing spec folder."""


class TraceError(ReviewError):
    """The job trace could not be read."""


class RefLoadError(ReviewError):
    """The specs at one side of the review (base or head) are invalid."""

    def __init__(self, side: str, ref: str, error: SpecLoadError) -> None:
        self.side = side
        self.ref = ref
        self.error = error
        super().__init__(f"cannot load the {side} specs ({ref}): {error}")
