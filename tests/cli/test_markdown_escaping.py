"""Markdown quotes what it shows: `<`, `>` and `&` become entities outside code spans, so a
message such as the quota-cut fix `"<reason>"` is shown on GitHub and GitLab, not dropped
as an unknown HTML tag; inside a code span (shown literally) nothing is changed."""

from __future__ import annotations

from trainform.policies.review.render_markdown import escape_html


def test_angle_brackets_outside_code_spans_become_entities() -> None:
    message = 'add the annotation x: "<reason>" to confirm & retry'
    assert escape_html(message) == 'add the annotation x: "&lt;reason&gt;" to confirm &amp; retry'


def test_code_spans_are_left_as_written() -> None:
    text = "keep `a<b>` and ``x`<y>`` but not <z>"
    assert escape_html(text) == "keep `a<b>` and ``x`<y>`` but not &lt;z&gt;"


def test_an_unclosed_backtick_does_not_protect_what_follows() -> None:
    assert escape_html("a ` <b>") == "a ` &lt;b&gt;"
