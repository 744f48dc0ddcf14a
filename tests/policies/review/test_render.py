"""Renderers: Markdown stays within a comment's size, text and JSON read the same report."""

from __future__ import annotations

import json
from decimal import Decimal

from trainform.policies.review.capacity import Capacity, ProjectFigures
from trainform.policies.review.cells import duration, duration_delta
from trainform.policies.review.render_json import render_review_json
from trainform.policies.review.render_markdown import render_review_markdown
from trainform.policies.review.render_text import render_review_text
from trainform.policies.review.report import ReviewReport
from trainform.policies.review.semantic import ChangeAction, FieldChange, SemanticChange


def big_report(changes: int) -> ReviewReport:
    projects = {
        f"team-{i:04d}": ProjectFigures(Decimal(8), Decimal(16), (f"q{i}",)) for i in range(500)
    }
    moved = {k: ProjectFigures(Decimal(0), Decimal(8), v.queues) for k, v in projects.items()}
    return ReviewReport(
        base="main (1234567)",
        head="working tree",
        spec_dir="specs",
        changes=[
            SemanticChange(
                "Queue",
                f"Queue/q{i}",
                ChangeAction.CHANGED,
                f"specs/queues.yaml:{i * 10 + 1}:1",
                (FieldChange("pools[gpu].nominalQuota.gpu", "8", "0"),),
            )
            for i in range(changes)
        ],
        before=Capacity({}, {}, {}, projects),
        after=Capacity({}, {}, {}, moved),
    )


def test_markdown_of_a_huge_change_fits_a_comment_with_a_note() -> None:
    markdown = render_review_markdown(big_report(3000))
    assert len(markdown) <= 60_000
    assert "more not shown; `--format json` lists them all" in markdown
    assert markdown.startswith("<!-- trainform-review -->\n### trainform review: allowed by policy")
    assert markdown.count("<details>") == markdown.count("</details>")


def test_markdown_is_cut_hard_as_a_last_resort() -> None:
    markdown = render_review_markdown(big_report(10), max_characters=1500)
    assert len(markdown) <= 1500 and markdown.endswith("`--format json` has all of it._\n")


def test_small_review_is_not_cut() -> None:
    markdown = render_review_markdown(big_report(3))
    assert "not shown" not in markdown and "`Queue/q2`" in markdown


def test_text_and_json_show_the_same_changes() -> None:
    report = big_report(2)
    text = render_review_text(report)
    assert "changed Queue/q1 (specs/queues.yaml:11:1)" in text
    assert "pools[gpu].nominalQuota.gpu: 8 → 0" in text
    document = json.loads(render_review_json(report))
    assert document["verdict"] == "pass" and document["simulation"] is None
    assert document["capacity"]["head"]["projects"]["team-0001"]["guaranteed"] == 0


def test_waits_read_as_durations() -> None:
    assert [duration(s) for s in (0, 45, 600, 630, 3900, 90000, None)] == [
        "0s", "45s", "10m", "10m30s", "1h05m", "1d1h", "-"
    ]  # fmt: skip
    assert (duration_delta(60, 3660), duration_delta(3660, 60), duration_delta(5, 5.2)) == (
        "+1h00m",
        "-1h00m",
        "0",
    )
