"""`trainform drill` of the quickstart job on the local provider, through the CLI, with real
processes: one drill (baseline, congested, failure) made once for the module, then each
acceptance point checked on its report, the state, the platform and `usage`; the HTML
report read in headless Chromium; the Markdown rendering against a golden file; and the
refusals (production, a job whose plan is not empty) changing nothing.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from trainform.cli.render.drill_report import render_drill_markdown

from tests.engine.support import QUICKSTART, copy_example, run_trainform
from tests.test_golden import check_golden

JOB = "TrainingJob/research/bigram"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "drill"
pytestmark = pytest.mark.slow


def ok(folder: Path, *args: str, timeout: float = 120) -> str:
    result = run_trainform(*args, cwd=folder, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def settle(folder: Path) -> None:
    """Apply until the plan is empty: the run trained, then evaluated."""
    for _ in range(3):
        ok(folder, "apply", ".", "--env", "ci", "--auto-approve")
        ok(folder, "status", "--dir", ".", "--env", "ci", "--wait", "--timeout", "60")
    assert (
        run_trainform("plan", ".", "--env", "ci", "--detailed-exitcode", cwd=folder).returncode == 0
    )


def platform_rows(folder: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """The platform's object rows and every unfinished attempt."""
    connection = sqlite3.connect(folder / ".trainform" / "ci" / "platform.db")
    try:
        objects = sorted(connection.execute("SELECT address, document FROM objects"))
        busy = [r[0] for r in connection.execute(
            "SELECT id FROM attempts WHERE phase IN ('queued', 'running')"
        )]  # fmt: skip
    finally:
        connection.close()
    return objects, busy


def state_resources(folder: Path) -> dict[str, Any]:
    return json.loads((folder / ".trainform" / "ci" / "state.json").read_text())["resources"]


@pytest.fixture(scope="module")
def drilled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = copy_example(QUICKSTART, tmp_path_factory.mktemp("drill") / "quickstart", jobs=True)
    training = folder / "specs" / "training.yaml"
    limit = "  retries:\n    limit: 2\n"
    training.write_text(training.read_text().replace(limit, f"{limit}    backoff: 1s\n"))
    ok(folder, "lock", ".", "--env", "ci")
    settle(folder)
    before = {"state": state_resources(folder), "platform": platform_rows(folder)}
    out = folder / "evidence"
    result = run_trainform(
        "drill", "bigram", "--dir", ".", "--env", "ci", "--out", str(out),
        "--time-limit", "60s", "--hold", "1s", cwd=folder, timeout=240,
    )  # fmt: skip
    return {
        "folder": folder,
        "result": result,
        "before": before,
        "report": json.loads((out / "report.json").read_text()),
        "out": out,
    }


def condition(drilled: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in drilled["report"]["conditions"] if c["name"] == name)


def verdict(entry: dict[str, Any], item: str) -> dict[str, str]:
    return next(v for v in entry["verdicts"] if v["item"] == item)


def test_the_drill_writes_three_conditions_of_the_same_job(drilled: dict[str, Any]) -> None:
    result = drilled["result"]
    assert result.returncode == 0, result.stdout + result.stderr
    report = drilled["report"]
    assert report["formatVersion"] == 1 and report["job"] == JOB
    assert [c["name"] for c in report["conditions"]] == ["baseline", "congested", "failure"]
    runs = {c["runId"] for c in report["conditions"]}
    assert len(runs) == 3, "each condition is a run of its own"
    assert {c["identity"] for c in report["conditions"]} == {report["identity"]}
    for entry in report["conditions"]:
        assert entry["outcome"] == "succeeded", entry
        assert verdict(entry, "run completes")["verdict"] == "verified"
        assert set(entry["breakdown"]["run"]) == {
            "wait", "setup", "dataWait", "compute", "checkpoint", "recoveryRecompute",
            "evaluation", "unaccounted",
        }  # fmt: skip
        assert entry["usage"]["cpuHours"] > 0
    assert {(u["framework"], u["provider"]) for u in report["untested"]} >= {
        ("python", "slurm"), ("pytorch (torchrun)", "local")
    }  # fmt: skip
    assert ("python", "local") not in {(u["framework"], u["provider"]) for u in report["untested"]}
    assert (drilled["out"] / "report.md").read_text().startswith("### trainform drill of")


def test_the_congested_run_waits_with_the_schedulers_reason(drilled: dict[str, Any]) -> None:
    congested = condition(drilled, "congested")
    waited = congested["delivery"]["waitedSeconds"]
    assert waited >= 1.0, "held behind the fillers for --hold"
    reasons = [w["reason"] for w in congested["waits"]]
    assert any(r.startswith("queue default-queue: cpu 2/2 in use by 2 jobs") for r in reasons)
    assert verdict(congested, "waits with its reason")["verdict"] == "verified"
    fillers = congested["congestion"]["fillers"]
    assert fillers and congested["congestion"]["left"] == []
    baseline = condition(drilled, "baseline")
    assert baseline["delivery"]["waitedSeconds"] < waited


def test_the_failure_run_recovers_from_the_latest_checkpoint_with_the_same_metric(
    drilled: dict[str, Any],
) -> None:
    failure = condition(drilled, "failure")
    fault = failure["fault"]
    assert fault["injected"] and "SIGKILL" in fault["what"]
    killed, resumed = failure["timeline"][:2]
    assert (killed["phase"], killed["cause"]) == ("failed", "node-failure")
    recovery = failure["recovery"]
    # the latest valid checkpoint when the retry was submitted (the fault's own record may
    # be one older: a checkpoint can land between the drill's read and its kill)
    assert recovery["checkpoint"] == recovery["latestValid"] == resumed["resumedFrom"]
    assert fault["latestValidCheckpoint"]["step"] <= recovery["step"]
    assert recovery["lostSteps"] == killed["lastStep"] - recovery["step"]
    assert recovery["lostSeconds"] is not None
    assert verdict(failure, "recovers from the latest valid checkpoint")["verdict"] == "verified"
    baseline = condition(drilled, "baseline")
    assert failure["metrics"]["perplexity"] == pytest.approx(baseline["metrics"]["perplexity"])
    assert verdict(failure, "result matches the baseline")["verdict"] == "verified"


def test_after_the_drill_plan_is_empty_and_state_and_platform_are_as_before(
    drilled: dict[str, Any],
) -> None:
    folder = drilled["folder"]
    plan = run_trainform("plan", ".", "--env", "ci", "--detailed-exitcode", cwd=folder)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert state_resources(folder) == drilled["before"]["state"]
    objects, busy = platform_rows(folder)
    assert objects == drilled["before"]["platform"][0] and busy == []
    assert drilled["report"]["cleanup"] == {
        "stateRestored": True, "planAfterDrill": "no changes", "left": []
    }  # fmt: skip


def test_usage_charges_each_condition_of_the_drill(drilled: dict[str, Any]) -> None:
    usage = json.loads(
        ok(drilled["folder"], "usage", "--dir", ".", "--env", "ci", "--format", "json")
    )
    charged = {d["runId"]: d["condition"] for d in usage["drills"]}
    for entry in drilled["report"]["conditions"]:
        assert charged[entry["runId"]] == entry["name"]
    fillers = condition(drilled, "congested")["congestion"]["fillers"]
    assert charged[fillers[0]["runId"]] == "congested (filler)"
    report = drilled["report"]
    # a filler admitted but cancelled before its process started held the quota for free
    fillers_cost = condition(drilled, "congested")["congestion"]["usage"]["cpuHours"]
    runs_cost = sum(c["usage"]["cpuHours"] for c in report["conditions"])
    assert report["usage"]["cpuHours"] == pytest.approx(runs_cost + fillers_cost, abs=1e-5)
    text = ok(drilled["folder"], "usage", "--dir", ".", "--env", "ci")
    assert "Drills (included above):" in text


def test_production_is_refused_unless_allowed_and_nothing_changes(
    drilled: dict[str, Any], tmp_path: Path
) -> None:
    folder = drilled["folder"]
    config = folder / "trainform.yaml"
    original = config.read_text()
    try:
        config.write_text(original.replace("  ci:\n", "  ci:\n    production: true\n", 1))
        serial = json.loads((folder / ".trainform" / "ci" / "state.json").read_text())["serial"]
        result = run_trainform("drill", "bigram", "--env", "ci", "--out", str(tmp_path), cwd=folder)
        assert result.returncode == 1
        assert "environment ci is production" in result.stderr
        assert "--allow-production" in result.stderr
        assert not (tmp_path / "report.json").exists()
        after = json.loads((folder / ".trainform" / "ci" / "state.json").read_text())["serial"]
        assert after == serial
    finally:
        config.write_text(original)


def test_the_html_report_reads_right_in_chromium_offline(
    drilled: dict[str, Any], browser: Any
) -> None:
    report_file = drilled["out"] / "report.html"
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    try:
        page.goto(report_file.as_uri())
        assert page.locator("h1").inner_text() == f"trainform drill of {JOB}"
        rows = page.get_by_role("table", name="conditions").locator("tbody tr")
        assert [r.split("\t")[:2] for r in rows.all_inner_texts()] == [
            ["baseline", "succeeded"], ["congested", "succeeded"], ["failure", "succeeded"]
        ]  # fmt: skip
        waits = page.locator("#condition-congested ul.waits").inner_text()
        assert "queue default-queue: cpu 2/2 in use" in waits
        recovery = page.locator("#condition-failure p.recovery").inner_text()
        assert "the latest valid checkpoint" in recovery
        verdicts = page.get_by_role("table", name="verdicts of failure")
        colour = verdicts.locator("td.verdict-green").first.evaluate(
            "e => getComputedStyle(e).color"
        )
        assert colour == "rgb(34, 134, 58)"
        assert page.get_by_role("table", name="untested combinations").locator("tbody tr").count()
        assert requested == [report_file.as_uri()]
    finally:
        page.close()


def test_the_markdown_report_matches_its_golden_file(update_golden: bool) -> None:
    report = json.loads((GOLDEN / "report.json").read_text())
    check_golden(GOLDEN / "report.md", render_drill_markdown(report), update_golden)
