"""Drift reports for admins on the applied quickstart: Markdown and JSON golden files, the
self-contained HTML, history across runs, acknowledgements and the drift CLI.

Drift is made by hand the way an admin would meet it: a queue edited in the platform
database (with the time the platform records), a quota row deleted, a dataset file
changed, an object trainform owns but state forgets. Times are fixed so golden files hold.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from trainform.cli.render.drift_report import render_drift_html, render_drift_markdown
from trainform.cli.render.drift_text import render_drift_json, render_drift_text
from trainform.planner.backends.drift_runs import FolderDriftRuns
from trainform.planner.drift_acknowledgements import AcknowledgementError
from trainform.planner.drift_model import DriftReport
from trainform.planner.drift_run import check_drift
from trainform.planner.workspace import Workspace, open_workspace

from tests.engine.support import SpecFolder, run_trainform
from tests.test_golden import check_golden

GOLDEN = Path(__file__).parents[1] / "golden" / "drift" / "quickstart"
QUEUE = "Queue/default-queue"
QUOTA = "Quota/research/research-default"
EDITED_AT = "2026-05-04T08:30:00Z"
T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def at(day: int, hour: int = 9) -> datetime:
    return datetime(2026, 5, day, hour, tzinfo=UTC)


@pytest.fixture
def applied(quickstart: SpecFolder) -> SpecFolder:
    quickstart.converge()
    return quickstart


@pytest.fixture
def workspace(applied: SpecFolder) -> Iterator[Workspace]:
    opened = open_workspace(str(applied.root))
    yield opened
    opened.providers.close()


def edit_queue(folder: SpecFolder, priority: int) -> None:
    live = folder.document_of(QUEUE)
    live["spec"]["defaultPriority"] = priority
    folder.query(
        "UPDATE objects SET document = ?, updated_at = ? WHERE address = ?",
        (json.dumps(live, sort_keys=True), EDITED_AT, QUEUE),
    )


def make_drift(folder: SpecFolder) -> None:
    edit_queue(folder, 5)
    folder.edit("specs/platform.yaml", "defaultPriority: 100", "defaultPriority: 50")
    folder.query("DELETE FROM objects WHERE address = ?", (QUOTA,))
    edited = folder.root / "data/tiny-corpus/v1/part-000.txt"
    edited.write_text("edited\n")
    moment = datetime.strptime(EDITED_AT, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    os.utime(edited, (moment, moment))
    add_orphan(folder)


def fixed(report: DriftReport) -> DriftReport:
    """The lineage is a random id per state; golden files hold a placeholder."""
    report.lineage = "00000000-0000-0000-0000-000000000000"
    return report


def write_acknowledgements(folder: Path, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "acknowledgements.yaml").write_text(text)
    return folder


ACKNOWLEDGE_QUEUE = """\
apiVersion: trainform/v1
kind: DriftAcknowledgements
acknowledgements:
  - address: Queue/default-*
    finding: modified
    field: spec.defaultPriority
    reason: lowered by hand while the cluster is drained (INC-42)
    expires: 2026-05-05
"""


# reports -----------------------------------------------------------------------------------


def test_markdown_and_json_reports_match_their_golden_files(
    applied: SpecFolder, update_golden: bool
) -> None:
    make_drift(applied)
    workspace = open_workspace(str(applied.root))
    try:
        report = fixed(check_drift(workspace, now=T0))
    finally:
        workspace.providers.close()

    check_golden(GOLDEN / "report.md", render_drift_markdown(report), update_golden)
    check_golden(GOLDEN / "report.json", render_drift_json(report), update_golden)
    data = json.loads(render_drift_json(report))
    assert data["checkedAt"] == "2026-05-04T09:00:00Z"
    queue = next(f for f in data["findings"] if f["address"] == QUEUE)
    assert queue["changes"] == [
        {
            "path": "spec.defaultPriority",
            "before": 100,
            "after": 5,
            "desired": 50,
            "forcesReplacement": False,
        }
    ]
    assert queue["evidence"]["updatedAt"] == EDITED_AT
    corpus = next(f for f in data["findings"] if f["drift"] == "data-mutated")
    assert (corpus["evidence"]["changed"], corpus["evidence"]["modifiedAt"]) == (
        ["part-000.txt"],
        EDITED_AT,
    )
    assert "trainform import Project/stray Project/stray" in render_drift_markdown(report)


def test_a_report_with_history_and_acknowledgements_matches_its_golden_files(
    workspace: Workspace, applied: SpecFolder, update_golden: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(applied.root.parent)  # the acknowledgements' file:line is relative
    trusted = write_acknowledgements(
        Path("trusted"),
        ACKNOWLEDGE_QUEUE
        + "  - {address: Dataset/*, finding: data-mutated, reason: old, expires: 2026-01-31}\n",
    )
    edit_queue(applied, 5)
    add_orphan(applied)
    check_drift(workspace, trusted, now=at(3))
    applied.query("DELETE FROM objects WHERE address = 'Project/stray'")

    report = fixed(check_drift(workspace, trusted, now=at(4)))

    golden = GOLDEN.with_name("history")
    check_golden(golden / "report.md", render_drift_markdown(report), update_golden)
    check_golden(golden / "report.json", render_drift_json(report), update_golden)
    assert not report.drifted and report.findings[0].acknowledged is not None
    assert [r.address for r in report.resolved] == ["Project/stray"]


def test_every_finding_prints_its_remedy(applied: SpecFolder) -> None:
    make_drift(applied)
    workspace = open_workspace(str(applied.root))
    try:
        report = check_drift(workspace, now=T0, record=False)
    finally:
        workspace.providers.close()
    text = render_drift_text(report)

    assert {f.drift for f in report.findings} == {"modified", "missing", "data-mutated", "orphaned"}
    assert text.count("    remedy: ") == len(report.findings)
    assert (
        "`trainform apply` to set spec.defaultPriority to 50; or, to accept the live "
        "value, set spec.defaultPriority: 5 in the spec of Queue/default-queue "
        "(specs/platform.yaml:21:1) and apply"
    ) in text
    assert f"`trainform apply` to create {QUOTA} again" in text
    assert "    ~ spec.defaultPriority: applied 100, live 5, desired 50" in text


def test_the_html_report_is_one_self_contained_escaped_file(
    workspace: Workspace, applied: SpecFolder
) -> None:
    edit_queue(applied, 5)
    report = check_drift(workspace, now=T0, record=False)
    report.findings[0].message = "<script>alert(1)</script>"

    html = render_drift_html(report)

    assert html.startswith("<!DOCTYPE html>")
    for external in ("<script", "<link", "src=", "url(", "@import", "http://", "https://"):
        assert external not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "@media print" in html
    assert "<code>trainform apply</code>" in html


# history and acknowledgements ---------------------------------------------------------------


def test_history_a_finding_appears_persists_is_acknowledged_expires_and_is_resolved(
    workspace: Workspace, applied: SpecFolder, tmp_path: Path
) -> None:
    edit_queue(applied, 5)

    first = check_drift(workspace, now=at(3))
    second = check_drift(workspace, now=at(4))
    trusted = write_acknowledgements(tmp_path / "trusted", ACKNOWLEDGE_QUEUE)
    acknowledged = check_drift(workspace, trusted, now=at(5))
    expired = check_drift(workspace, trusted, now=at(6))
    edit_queue(applied, 100)
    resolved = check_drift(workspace, trusted, now=at(7))

    (appeared,) = first.findings
    assert appeared.remedy.startswith("`trainform apply` to restore spec.defaultPriority to 100;")
    assert (appeared.first_seen, appeared.new, first.drifted) == (
        "2026-05-03T09:00:00Z",
        True,
        True,
    )
    (persisting,) = second.findings
    assert (persisting.first_seen, persisting.last_seen, persisting.new) == (
        "2026-05-03T09:00:00Z",
        "2026-05-04T09:00:00Z",
        False,
    )
    (covered,) = acknowledged.findings
    assert covered.acknowledged is not None and not acknowledged.drifted
    assert covered.acknowledged.reason.endswith("(INC-42)")
    assert "acknowledged until 2026-05-05" in render_drift_text(acknowledged)
    (uncovered,) = expired.findings
    assert uncovered.acknowledged is None and expired.drifted
    assert uncovered.first_seen == "2026-05-03T09:00:00Z"
    (sentence,) = expired.expired_acknowledgements
    assert sentence.startswith(f"{trusted / 'acknowledgements.yaml'}:4:5: ")
    assert "expired on 2026-05-05" in sentence
    assert not resolved.findings and not resolved.drifted
    assert [(r.address, r.drift, r.first_seen) for r in resolved.resolved] == [
        (QUEUE, "modified", "2026-05-03T09:00:00Z")
    ]
    assert resolved.previous_run == "2026-05-06T09:00:00Z"
    runs = workspace.backend.drift_runs().read()
    assert [run["checkedAt"][:10] for run in runs] == [f"2026-05-0{d}" for d in range(3, 8)]
    assert [run["drifted"] for run in runs] == [True, True, False, True, False]
    kept = json.dumps(runs)
    assert '"before"' not in kept and '"after"' not in kept  # identities only, no values


def test_an_acknowledgement_of_one_field_does_not_cover_another(
    workspace: Workspace, applied: SpecFolder, tmp_path: Path
) -> None:
    live = applied.document_of(QUEUE)
    live["spec"]["defaultPriority"] = 5
    live["spec"]["maxRuntime"] = "4h"
    applied.set_document(QUEUE, live)
    trusted = write_acknowledgements(tmp_path / "trusted", ACKNOWLEDGE_QUEUE)

    report = check_drift(workspace, trusted, now=at(4), record=False)

    assert report.findings[0].acknowledged is None and report.drifted


def test_the_history_keeps_only_the_newest_runs(tmp_path: Path) -> None:
    runs = FolderDriftRuns(tmp_path / "state.json.drift")
    for number in range(5):
        runs.append({"checkedAt": str(number)}, keep=3)

    assert [run["checkedAt"] for run in runs.read()] == ["2", "3", "4"]
    assert len(list(runs.folder.iterdir())) == 3


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        pytest.param(
            "finding: modifed\n    reason: r\n    expires: 2026-01-01",
            ":4:14: acknowledgements.0.finding: unknown finding kind `modifed`; "
            "did you mean `modified`?",
            id="unknown-kind",
        ),
        pytest.param(
            "finding: modified\n    reason: r\n    expires: someday",
            ":6:14: acknowledgements.0.expires: Input should be a valid date",
            id="bad-date",
        ),
        pytest.param(
            "finding: modified\n    reason: r\n    expires: 2026-01-01\n    feild: x",
            ":7:5: acknowledgements.0.feild: Extra inputs are not permitted",
            id="unknown-field",
        ),
    ],
)
def test_a_mistake_in_the_acknowledgements_names_file_line_and_field(
    workspace: Workspace, tmp_path: Path, entry: str, problem: str
) -> None:
    trusted = write_acknowledgements(
        tmp_path / "trusted",
        "kind: DriftAcknowledgements\nacknowledgements:\n  - address: Queue/a\n    " + entry,
    )

    with pytest.raises(AcknowledgementError) as raised:
        check_drift(workspace, trusted, now=at(4))

    assert str(raised.value).startswith(
        f"cannot read acknowledgements {trusted / 'acknowledgements.yaml'}{problem}"
    )
    assert workspace.backend.drift_runs().read() == []


# the CLI ------------------------------------------------------------------------------------


def test_the_cli_writes_reports_lists_history_and_honours_acknowledgements(
    applied: SpecFolder, tmp_path: Path
) -> None:
    edit_queue(applied, 5)
    out = tmp_path / "report.html"

    html = run_trainform("drift", ".", "--format", "html", "--out", str(out), cwd=applied.root)
    assert html.returncode == 2, html.stderr
    assert html.stdout == (
        f"Drift: 1 modified (of 8 resources checked). Wrote the html report to {out}.\n"
    )
    assert "Queue/default-queue" in out.read_text()

    trusted = write_acknowledgements(
        tmp_path / "trusted", ACKNOWLEDGE_QUEUE.replace("2026-05-05", "2999-01-01")
    )
    markdown = run_trainform(
        "drift", ".", "--format", "markdown", "--policies", str(trusted), cwd=applied.root
    )
    assert markdown.returncode == 0, markdown.stderr
    assert "· acknowledged" in markdown.stdout
    assert "**No open drift: 1 acknowledged (of 8 resources checked).**" in markdown.stdout

    nowhere = run_trainform("drift", ".", "--out", str(tmp_path / "no" / "r.md"), cwd=applied.root)
    assert nowhere.returncode == 1
    assert f"Invalid value for --out: {tmp_path / 'no'} is not a folder" in nowhere.stderr

    broken = write_acknowledgements(tmp_path / "broken", "acknowledgements: [{address: x}]\n")
    refused = run_trainform("drift", ".", "--policies", str(broken), cwd=applied.root)
    assert refused.returncode == 1
    assert "acknowledgements.yaml:1:20: acknowledgements.0.finding: Field required" in (
        refused.stderr
    )

    history = run_trainform("drift", ".", "--history", cwd=applied.root)
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert lines[0].split() == [
        "checked", "at", "serial", "checked", "open", "new", "resolved", "acknowledged"
    ]  # fmt: skip
    assert [line.split()[3:7] for line in lines[1:]] == [["1", "1", "0", "0"], ["0", "0", "0", "1"]]
    as_json = json.loads(
        run_trainform("drift", ".", "--history", "--format", "json", cwd=applied.root).stdout
    )
    assert as_json["formatVersion"] == 1
    assert [run["acknowledged"] for run in as_json["runs"]] == [0, 1]
    for result in (html, markdown, nowhere, refused, history):
        assert "Traceback" not in result.stdout + result.stderr


def test_drift_reads_only_with_no_record_or_when_the_history_is_not_writable(
    applied: SpecFolder,
) -> None:
    edit_queue(applied, 5)
    history = applied.root / ".trainform" / "state.json.drift"

    only_read = run_trainform("drift", ".", "--no-record", cwd=applied.root)
    assert only_read.returncode == 2, only_read.stderr
    assert not history.exists() and only_read.stderr == ""

    history.write_text("a file where the history folder would be\n")
    blocked = run_trainform("drift", ".", cwd=applied.root)

    assert blocked.returncode == 2, blocked.stderr
    assert "modified: Queue/default-queue" in blocked.stdout
    assert blocked.stderr.startswith(
        "Note: this run was not recorded: the drift history .trainform/state.json.drift is "
        "not writable (File exists)."
    )
    assert len(blocked.stderr.splitlines()) == 1 and "Traceback" not in blocked.stderr


# plan and drift agree -----------------------------------------------------------------------


def add_orphan(folder: SpecFolder) -> None:
    folder.query(
        "INSERT INTO objects (address, kind, name, project, manager, document, outputs,"
        " generation, created_at, updated_at) VALUES ('Project/stray', 'Project', 'stray',"
        " NULL, 'trainform', ?, '{}', 1, ?, ?)",
        (json.dumps({"metadata": {}, "spec": {"owners": ["x@example.com"]}}), EDITED_AT, EDITED_AT),
    )


def test_plan_lists_orphans_and_exits_2_like_drift_until_acknowledged(
    applied: SpecFolder, tmp_path: Path
) -> None:
    add_orphan(applied)

    plan = run_trainform("plan", ".", "--detailed-exitcode", cwd=applied.root)
    drift = run_trainform("drift", ".", cwd=applied.root)
    as_json = run_trainform("plan", ".", "--format", "json", cwd=applied.root)
    trusted = write_acknowledgements(
        tmp_path / "trusted",
        "kind: DriftAcknowledgements\nacknowledgements:\n  - {address: Project/stray, "
        "finding: orphaned, reason: kept for the audit, expires: 2999-01-01}\n",
    )
    (trusted / "policies.yaml").write_text(
        "settings: {project-isolation: {adminPaths: ['specs/**']}}\n"
    )
    acknowledged = run_trainform(
        "plan", ".", "--detailed-exitcode", "--policies", str(trusted), cwd=applied.root
    )

    assert (plan.returncode, drift.returncode) == (2, 2), plan.stdout + plan.stderr
    assert "No changes." in plan.stdout
    assert (
        "  - warning [orphaned] Project/stray: owned by trainform on local but unknown to state "
        "and specs: declare it and run `trainform import Project/stray Project/stray`"
    ) in plan.stdout
    (finding,) = json.loads(as_json.stdout)["findings"]
    assert (finding["kind"], finding["address"]) == ("orphaned", "Project/stray")
    assert acknowledged.returncode == 0, acknowledged.stdout + acknowledged.stderr
    assert "(acknowledged until 2999-01-01: kept for the audit)" in acknowledged.stdout


def test_every_drift_finding_of_a_plan_can_be_acknowledged() -> None:
    from trainform.planner.drift_acknowledgements import FINDING_KINDS, PLAN_KINDS
    from trainform.planner.plan_model import PLAN_ONLY_FINDINGS, PlanFinding

    produced = {"orphaned", "retries-exhausted", "checkpoint-invalid", "evaluation-failed"}
    produced |= {"gate-fail", "data-mutated", "data-missing", "tag-moved", "tag-missing"}
    for kind in sorted(produced):
        assert PlanFinding("Job/x", kind, "warning", "m").is_drift, kind
        assert PLAN_KINDS.get(kind, kind) in FINDING_KINDS, kind
    for kind in sorted(PLAN_ONLY_FINDINGS):
        assert not PlanFinding("Job/x", kind, "info", "m").is_drift, kind
    assert not PlanFinding("Job/x", "orphaned", "warning", "m", acknowledged="why").is_drift
