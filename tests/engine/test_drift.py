"""detect_drift on the applied quickstart: each class of finding, read-only, and CLI exit codes.

Drift is made the way it happens: someone edits the platform database or a dataset's
files by hand, or a process dies mid-apply.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from trainform.cli.render.drift_text import render_drift_text
from trainform.planner.drift import DriftReport, detect_drift

from tests.engine.support import SpecFolder, run_trainform, simulate_crash

QUEUE = "Queue/default-queue"
QUOTA = "Quota/research/research-default"
CORPUS = "Dataset/tiny-corpus"
HELDOUT = "Dataset/heldout"


@pytest.fixture
def applied(quickstart: SpecFolder) -> SpecFolder:
    quickstart.converge()
    return quickstart


def drift_of(folder: SpecFolder) -> DriftReport:
    return detect_drift(folder.state(), folder.providers())


def kinds_of(report: DriftReport) -> list[tuple[str, str]]:
    return [(finding.drift, finding.address) for finding in report.findings]


def test_an_applied_platform_has_no_drift(applied: SpecFolder) -> None:
    report = drift_of(applied)

    assert not report.drifted
    assert report.checked == 8
    assert render_drift_text(report) == "No drift: 8 resources match what was applied.\n"


def test_no_state_means_nothing_to_check(quickstart: SpecFolder) -> None:
    report = drift_of(quickstart)

    assert not report.drifted and report.checked == 0 and report.lineage is None


def test_a_queue_edited_by_hand_is_modified_with_the_field_diff(applied: SpecFolder) -> None:
    live = applied.document_of(QUEUE)
    live["spec"]["pools"][0]["nominalQuota"]["cpu"] = "1"
    live["spec"]["defaultPriority"] = 5
    applied.set_document(QUEUE, live)

    report = drift_of(applied)

    assert kinds_of(report) == [("modified", QUEUE)]
    (finding,) = report.findings
    assert finding.provider == "local"
    assert [(c.path, c.before, c.after) for c in finding.changes] == [
        ("spec.defaultPriority", 100, 5),
        ("spec.pools[0].nominalQuota.cpu", "2", "1"),
    ]
    assert finding.message == (
        "changed outside trainform: spec.defaultPriority, spec.pools[0].nominalQuota.cpu"
    )
    text = render_drift_text(report)
    assert "    ~ spec.pools[0].nominalQuota.cpu: applied 2, live 1" in text
    assert text.endswith("Drift: 1 modified (of 8 resources checked).\n")


def test_a_deleted_quota_row_is_missing(applied: SpecFolder) -> None:
    applied.query("DELETE FROM objects WHERE address = ?", (QUOTA,))

    report = drift_of(applied)

    assert kinds_of(report) == [("missing", QUOTA)]
    assert report.findings[0].message == "recorded in state but not found on the provider"


@pytest.mark.parametrize(
    ("edit", "change"),
    [
        pytest.param(
            lambda root: (root / "data/tiny-corpus/v1/part-000.txt").write_text("edited\n"),
            "changed part-000.txt",
            id="file-edited",
        ),
        pytest.param(
            lambda root: (root / "data/tiny-corpus/v1/part-009.txt").write_text("new\n"),
            "added part-009.txt",
            id="file-added",
        ),
        pytest.param(
            lambda root: (root / "data/tiny-corpus/v1/part-001.txt").unlink(),
            "removed part-001.txt",
            id="file-removed",
        ),
    ],
)
def test_a_changed_file_under_a_recorded_version_is_data_mutated(
    applied: SpecFolder, edit: Callable[[Path], object], change: str
) -> None:
    edit(applied.root)

    report = drift_of(applied)

    assert kinds_of(report) == [("data-mutated", CORPUS)]
    (finding,) = report.findings
    assert finding.message == f"version v1: content differs from the recorded manifest ({change})"
    assert finding.evidence["version"] == "v1"
    assert finding.evidence["changes"] == [change]
    assert finding.evidence["expected"] != finding.evidence["found"]


def test_a_vanished_version_folder_is_data_missing(applied: SpecFolder) -> None:
    shutil.rmtree(applied.root / "data" / "heldout" / "v1")

    report = drift_of(applied)

    assert kinds_of(report) == [("data-missing", HELDOUT)]
    assert report.findings[0].message.startswith("version v1: ")


def test_a_trainform_object_unknown_to_state_is_orphaned(applied: SpecFolder) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = json.dumps({"metadata": {}, "spec": {"owners": ["x@example.com"]}})
    for address, manager in (("Project/stray", "trainform"), ("Project/theirs", "someone-else")):
        applied.query(
            "INSERT INTO objects (address, kind, name, project, manager, document, outputs,"
            " generation, created_at, updated_at)"
            " VALUES (?, 'Project', ?, NULL, ?, ?, '{}', 1, ?, ?)",
            (address, address.split("/")[1], manager, document, now, now),
        )

    report = drift_of(applied)

    assert kinds_of(report) == [("orphaned", "Project/stray")]
    finding = report.findings[0]
    assert finding.kind == "Project"
    assert "trainform import" in finding.message


def test_an_interrupted_apply_is_pending(applied: SpecFolder) -> None:
    backend = applied.backend()
    state = backend.read()
    assert state is not None
    intent = {
        "type": "intent",
        "address": QUEUE,
        "operation": "update",
        "kind": "Queue",
        "providers": ["local"],
    }
    backend.record(state, intent)
    simulate_crash(backend)

    report = drift_of(applied)

    assert kinds_of(report) == [("pending", QUEUE)]
    assert "interrupted during update" in report.findings[0].message


def test_drift_detection_changes_nothing(applied: SpecFolder) -> None:
    live = applied.document_of(QUEUE)
    live["spec"]["defaultPriority"] = 5
    applied.set_document(QUEUE, live)
    applied.query("DELETE FROM objects WHERE address = ?", (QUOTA,))
    rows = [dict(r) for r in applied.query("SELECT * FROM objects ORDER BY address")]
    state_file = applied.root / ".trainform" / "state.json"
    state_bytes = state_file.read_bytes()

    assert drift_of(applied).drifted

    assert [dict(r) for r in applied.query("SELECT * FROM objects ORDER BY address")] == rows
    assert state_file.read_bytes() == state_bytes


def test_the_cli_exits_0_without_drift_and_2_with_it(applied: SpecFolder) -> None:
    clean = run_trainform("drift", ".", cwd=applied.root)
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout == "No drift: 8 resources match what was applied.\n"

    applied.query("DELETE FROM objects WHERE address = ?", (QUOTA,))
    drifted = run_trainform("drift", ".", cwd=applied.root)
    assert drifted.returncode == 2, drifted.stderr
    assert f"missing: {QUOTA} (local): recorded in state but not found" in drifted.stdout

    as_json = run_trainform("drift", ".", "--format", "json", cwd=applied.root)
    assert as_json.returncode == 2
    report = json.loads(as_json.stdout)
    assert report["drifted"] is True
    assert [(f["drift"], f["address"]) for f in report["findings"]] == [("missing", QUOTA)]
    for result in (clean, drifted, as_json):
        assert "Traceback" not in result.stdout + result.stderr


def test_a_plan_that_restores_drift_keeps_what_was_applied(applied: SpecFolder) -> None:
    from trainform.planner.plan_model import ResourceChange

    recorded = applied.state().resources[QUEUE].spec  # type: ignore[union-attr]
    live = applied.document_of(QUEUE)
    live["spec"]["pools"][0]["nominalQuota"]["cpu"] = "8"
    applied.set_document(QUEUE, live)

    plan = applied.plan(refresh=True)

    (change,) = [c for c in plan.changes if c.address == QUEUE]
    assert change.before is not None
    assert change.before["spec"]["pools"][0]["nominalQuota"]["cpu"] == "8"
    assert change.applied == recorded
    again = ResourceChange.from_json(json.loads(json.dumps(change.to_json())))
    assert again.applied == recorded
    assert all("applied" not in c.to_json() for c in plan.changes if c.address != QUEUE)
