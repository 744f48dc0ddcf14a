"""The review as JSON: `ReviewReport.to_json()`, stable keys, formatVersion 1."""

from __future__ import annotations

import json

from trainform.policies.review.report import ReviewReport


def render_review_json(report: ReviewReport) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"
