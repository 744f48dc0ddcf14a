"""The HTML drift report opened in real headless Chromium: what an admin sees (visible text
and structure), that it loads nothing from anywhere, and that it prints. A screenshot and
the PDF stay in the test's tmp folder as artifacts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from planner.drift_run import check_drift
from planner.render.drift_report import render_drift_html
from planner.workspace import open_workspace
from tests.engine.support import SpecFolder
from tests.engine.test_drift_reports import EDITED_AT, QUEUE, QUOTA, make_drift
from tests.services.browser import launch_chromium


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    yield from launch_chromium()


@pytest.fixture
def report_file(quickstart: SpecFolder, tmp_path: Path) -> Path:
    quickstart.converge()
    make_drift(quickstart)
    workspace = open_workspace(str(quickstart.root))
    try:
        check_drift(workspace, now=datetime(2026, 5, 3, 9, tzinfo=UTC))
        report = check_drift(workspace, now=datetime(2026, 5, 4, 9, tzinfo=UTC))
    finally:
        workspace.providers.close()
    path = tmp_path / "drift.html"
    path.write_text(render_drift_html(report), encoding="utf-8")
    return path


def test_the_html_report_reads_right_in_chromium_offline_and_prints(
    browser: Any, report_file: Path, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    try:
        page.goto(report_file.as_uri())
        page.screenshot(path=str(tmp_path / "drift.png"), full_page=True)

        assert page.title() == "trainform drift report 2026-05-04T09:00:00Z"
        assert page.locator("h1").inner_text() == "trainform drift report"
        assert page.locator("#headline").inner_text() == (
            "Drift: 1 data-mutated, 1 missing, 1 modified, 1 orphaned (of 8 resources checked)."
        )
        severity = page.get_by_role("table", name="open findings by severity")
        assert severity.locator("tbody tr").all_inner_texts() == [
            "high\t2", "medium\t2", "low\t0"
        ]  # fmt: skip
        assert page.locator("section.instance h2").all_inner_texts() == ["Provider instance local"]
        addresses = page.locator("section.resource").evaluate_all(
            "sections => sections.map(s => s.dataset.address)"
        )
        assert addresses == ["Dataset/tiny-corpus", QUEUE, QUOTA, "Project/stray"]

        queue = page.locator(f'section.resource[data-address="{QUEUE}"] article.finding')
        assert queue.locator(".badge").all_inner_texts() == ["medium"]  # seen in the run before
        corpus = page.locator('section.resource[data-address="Dataset/tiny-corpus"] dl.evidence')
        assert "changed\npart-000.txt" in corpus.inner_text()
        assert queue.locator("table.changes tbody tr").inner_text().split("\t") == [
            "spec.defaultPriority", "100", "5", "50"
        ]  # fmt: skip
        assert f"updatedAt\n{EDITED_AT}" in queue.locator("dl.evidence").inner_text()
        assert queue.locator(".when").first.inner_text() == (
            "First seen 2026-05-03T09:00:00Z · last seen 2026-05-04T09:00:00Z"
        )
        assert (
            queue.locator(".remedy")
            .inner_text()
            .startswith("Remedy trainform apply to set spec.defaultPriority to 50;")
        )
        applied_colour = queue.locator("td.applied").evaluate("e => getComputedStyle(e).color")
        live_colour = queue.locator("td.live").evaluate("e => getComputedStyle(e).color")
        assert (applied_colour, live_colour) == ("rgb(179, 29, 40)", "rgb(34, 134, 58)")
        assert page.locator("article.finding").count() == 4
        assert requested == [report_file.as_uri()]

        pdf = page.pdf(path=str(tmp_path / "drift.pdf"))
        assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
    finally:
        page.close()
