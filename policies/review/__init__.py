"""Pull-request review of queue policy (`trainform review --base REF [--head REF]`).

Public API: `make_review(ReviewRequest) -> ReviewReport`, the renderers
`render_review_text`, `render_review_markdown`, `render_review_json`, the comment marker
`MARKER`, and the errors
`ReviewError` (root), `GitRefError`, `TraceError`, `RefLoadError`.

Nothing of the head ref runs: its files are read from Git's object database (gitrefs),
its templates render in the spec sandbox, and policies come only from a trusted path or the
base side's trainform.yaml (report). docs/review.md defines every figure.
"""

from trainform.policies.review.errors import GitRefError, RefLoadError, ReviewError, TraceError
from trainform.policies.review.render_json import render_review_json
from trainform.policies.review.render_markdown import MARKER, render_review_markdown
from trainform.policies.review.render_text import render_review_text
from trainform.policies.review.report import ReviewReport, ReviewRequest, make_review

__all__ = [
    "MARKER",
    "GitRefError",
    "RefLoadError",
    "ReviewError",
    "ReviewReport",
    "ReviewRequest",
    "TraceError",
    "make_review",
    "render_review_json",
    "render_review_markdown",
    "render_review_text",
]
