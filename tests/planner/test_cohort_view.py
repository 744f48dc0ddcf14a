"""Borrowing and lending per cohort (planner/cohort_view.py), as `status --platform` shows
them: what each queue borrows beyond its nominal quota, and what unused quota the cohort's
queues could still lend, capped by their lending limits."""

from __future__ import annotations

from decimal import Decimal

from trainform.cli.render.platform_text import render_platform_text
from trainform.planner.cohort_view import cohort_views
from trainform.planner.platform_view import PlatformView, QueueView


def _queue(
    name: str, cohort: str | None, nominal: int, used: int, lend: int | None = None
) -> QueueView:
    view = QueueView(
        name,
        "k8s",
        ["h100"],
        {"gpu": Decimal(nominal), "cpu": Decimal(0)},
        cohort=cohort,
        lendable={"gpu": Decimal(nominal if lend is None else lend), "cpu": Decimal(0)},
    )
    view.in_use = {"gpu": Decimal(used), "cpu": Decimal(0)}
    return view


def test_a_queue_over_its_nominal_quota_borrows_what_the_others_leave_unused() -> None:
    queues = [
        _queue("train", "research", 32, 40),
        _queue("eval", "research", 16, 4, lend=8),
        _queue("batch", "research", 8, 2),
        _queue("alone", None, 8, 8),
    ]
    [research] = cohort_views(queues)
    found = research.to_json()
    assert found["queues"] == ["batch", "eval", "train"]
    assert found["nominal"]["gpu"] == 56 and found["inUse"]["gpu"] == 46
    assert found["borrowedBy"] == {"train": {"gpu": 8, "gpuByType": {}}}
    assert found["borrowed"]["gpu"] == 8
    # eval leaves 12 unused but lends at most 8; batch leaves 6; train leaves none
    assert found["unusedLendable"]["gpu"] == 14

    text = render_platform_text(PlatformView([], queues, []))
    assert "  research (queues batch, eval, train)\n" in text
    assert "    borrowed: gpu 8, cpu 0, memory 0 (by train gpu 8; lent by the others)\n" in text
    assert "    unused, lendable: gpu 14, cpu 0, memory 0\n" in text
    assert "alone" not in text.split("Cohorts:")[1]
