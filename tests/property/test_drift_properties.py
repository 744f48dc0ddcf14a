"""Properties of drift history and rendering: the comparison with the previous run finds
exactly the new and the resolved findings and keeps firstSeen; no live value, whatever it
holds, changes the structure of the Markdown table or the HTML page it is shown in."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st
from trainform.cli.render.drift_report import render_drift_html, render_drift_markdown
from trainform.planner.diff import FieldChange
from trainform.planner.drift_history import compact_run, compare_with_history
from trainform.planner.drift_model import DriftFinding, DriftReport

ADDRESSES = st.sets(
    st.tuples(
        st.sampled_from(["Queue/a", "Queue/b", "Quota/p/q", "Dataset/d"]),
        st.sampled_from(["modified", "missing", "orphaned", "data-mutated"]),
    ),
    max_size=8,
)


def report_of(keys: set[tuple[str, str]], checked_at: str) -> DriftReport:
    findings = [
        DriftFinding(address, address.split("/")[0], drift, "m", "local")
        for address, drift in sorted(keys)
    ]
    return DriftReport("lineage", 1, 4, findings, checked_at)


@settings(max_examples=30, deadline=None)
@given(before=ADDRESSES, after=ADDRESSES)
def test_a_run_is_new_where_the_last_had_nothing_and_resolves_what_is_gone(
    before: set[tuple[str, str]], after: set[tuple[str, str]]
) -> None:
    first = compare_with_history(report_of(before, "2026-05-01T00:00:00Z"), [])
    second = compare_with_history(report_of(after, "2026-05-02T00:00:00Z"), [compact_run(first)])

    assert {(f.address, f.drift) for f in second.findings if f.new} == after - before
    assert {(r.address, r.drift) for r in second.resolved} == before - after
    for finding in second.findings:
        kept = (finding.address, finding.drift) in before
        assert finding.first_seen == ("2026-05-01T00:00:00Z" if kept else "2026-05-02T00:00:00Z")
        assert finding.last_seen == "2026-05-02T00:00:00Z"


@settings(max_examples=30, deadline=None)
@given(before=ADDRESSES, between=ADDRESSES, after=ADDRESSES)
def test_a_run_in_between_changes_no_finding_s_first_seen_nor_what_stays_open(
    before: set[tuple[str, str]], between: set[tuple[str, str]], after: set[tuple[str, str]]
) -> None:
    """Scheduled, then anyone's manual run, then scheduled: a finding open in all three
    keeps the first run's firstSeen; what the last run reports open and new follows the
    identity of each finding, as if the middle run had been the scheduled one."""
    first = compare_with_history(report_of(before, "2026-05-01T00:00:00Z"), [])
    middle = compare_with_history(report_of(between, "2026-05-02T00:00:00Z"), [compact_run(first)])
    history = [compact_run(first), compact_run(middle)]
    last = compare_with_history(report_of(after, "2026-05-03T00:00:00Z"), history)

    for finding in last.findings:
        key = (finding.address, finding.drift)
        if key in before and key in between:
            assert finding.first_seen == "2026-05-01T00:00:00Z" and not finding.new
        elif key in between:
            assert finding.first_seen == "2026-05-02T00:00:00Z" and not finding.new
        else:
            assert finding.new
    assert {(r.address, r.drift) for r in last.resolved} == between - after
    # a history of another state lineage (a recreated state) is not compared with
    other = DriftReport("another-lineage", 1, 4, [], "2026-05-03T00:00:00Z")
    assert compare_with_history(other, history).resolved == []
    assert all(
        f.new
        for f in compare_with_history(
            DriftReport("another-lineage", 1, 4, report_of(after, "x").findings, "x"), history
        ).findings
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def _tags(html: str) -> list[str]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def _modified(value: object) -> DriftReport:
    change = FieldChange("spec.note", "applied", value)
    finding = DriftFinding("Queue/a", "Queue", "modified", "changed", "local", [change])
    return DriftReport("lineage", 1, 1, [finding], "2026-05-01T00:00:00Z")


@settings(max_examples=30, deadline=None)
@given(
    value=st.one_of(
        st.text(alphabet=st.sampled_from("a|\\<>\n\x1e` "), max_size=12),
        st.text(max_size=40),
        st.integers(),
        st.lists(st.text(max_size=8)),
    )
)
def test_no_live_value_changes_the_structure_of_the_report(value: object) -> None:
    plain = _modified("plain")
    shown = _modified(value)

    assert _tags(render_drift_html(shown)) == _tags(render_drift_html(plain))
    row = next(
        line
        for line in render_drift_markdown(shown).splitlines()
        if line.startswith("| `spec.note`")
    )
    separators = re.findall(r"(?<!\\)\|", re.sub(r"\\\\", "", row))
    assert len(separators) == 5, row
