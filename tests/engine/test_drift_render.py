"""Drift text: an unset value reads `(unset)`, and warnings never make a report drifted."""

from __future__ import annotations

from trainform.cli.render.drift_text import render_drift_json, render_drift_text
from trainform.planner.diff import diff_documents
from trainform.planner.drift import DriftFinding, DriftReport


def test_an_unset_value_renders_as_unset_not_as_a_python_object() -> None:
    changes = diff_documents({"spec": {"a": "1"}}, {"spec": {"b": "2"}})
    report = DriftReport(
        "l", 1, 1, [DriftFinding("Queue/q", "Queue", "modified", "m", "hpc", changes)]
    )

    text = render_drift_text(report)

    assert "~ spec.a: applied 1, live (unset)" in text
    assert "~ spec.b: applied (unset), live 2" in text
    assert "object at 0x" not in text and "object at 0x" not in render_drift_json(report)


def test_a_warning_is_shown_but_is_not_drift() -> None:
    warning = DriftFinding("Quota/p/q", "Quota", "limit-shadowed", "QOS first", "hpc", warning=True)
    report = DriftReport("l", 1, 1, [warning])

    assert not report.drifted
    text = render_drift_text(report)
    assert "warning (limit-shadowed): Quota/p/q (hpc): QOS first" in text
    assert "No drift" in text
    modified = DriftFinding("Queue/q", "Queue", "modified", "m", "hpc")
    assert DriftReport("l", 1, 2, [warning, modified]).drifted
