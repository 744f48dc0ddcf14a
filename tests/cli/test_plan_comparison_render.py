"""cli.render.plan_comparison: what differs between a reviewed and a fresh plan, in words and
in Markdown that quotes spec values safely (a `|` cannot split a cell, a `<tag>` is shown)."""

from __future__ import annotations

from trainform.cli.render.plan_comparison import (
    render_comparison_markdown,
    render_comparison_text,
    render_overlaps_markdown,
)
from trainform.planner.plan_compare import (
    BindingDifference,
    ChangeDifference,
    Overlap,
    PlanComparison,
)

QUOTA = "Quota/team-a/team-a"


def comparison() -> PlanComparison:
    return PlanComparison(
        [BindingDifference("serial", 3, 5), BindingDifference("trainform.lock", None, "sha256:b")],
        [
            ChangeDifference(
                QUOTA,
                "field",
                {"before": 2, "after": 5},
                {"before": 4, "after": 5},
                "spec.limits.gpu",
            ),
            ChangeDifference(
                "Queue/a",
                "field",
                None,
                {"before": "x", "after": "<b>|c"},
                "metadata.annotations.note",
            ),
            ChangeDifference("Queue/b", "only-fresh", None, "create"),
            ChangeDifference("Queue/c", "action", "update", "replace"),
        ],
    )


def test_the_text_names_each_binding_and_difference_with_both_values() -> None:
    text = render_comparison_text(comparison(), "pr.tfplan")
    assert text.splitlines() == [
        "The reviewed plan pr.tfplan is stale, and the fresh plan makes different changes "
        "(4 differences); it needs a new review.",
        "Why it is stale (when reviewed -> now):",
        "  serial: 3 -> 5",
        "  trainform.lock: (none) -> sha256:b",
        "What differs between the reviewed and the fresh plan:",
        f"  {QUOTA} spec.limits.gpu: reviewed 2 -> 5, now 4 -> 5",
        "  Queue/a metadata.annotations.note: reviewed not changed, now x -> <b>|c",
        "  Queue/b: now create, not in the reviewed plan",
        "  Queue/c: reviewed update, now replace",
    ]


def test_markdown_quotes_values_in_code_spans_and_escapes_the_cell_separator() -> None:
    markdown = render_comparison_markdown(comparison(), "pr.tfplan")
    assert "| serial | `3` | `5` |" in markdown
    assert f"| `{QUOTA}` | `spec.limits.gpu` | `2 -> 5` | `4 -> 5` |" in markdown
    assert "| `not changed` | `x -> <b>\\|c` |" in markdown
    assert "| `Queue/b` | only-fresh | `not changed` | `create` |" in markdown
    overlaps = render_overlaps_markdown([Overlap("<#12>", {QUOTA: ("update", "delete")})], "p")
    assert overlaps.startswith("**&lt;#12&gt;** holds 1 resource that this plan changes too")
    assert f"| `{QUOTA}` | `update` | `delete` |" in overlaps
