"""Refresh-only: live values accepted into state, no provider touched, then drift is clean."""

from __future__ import annotations

import json

import pytest
from trainform.cli.render.refresh_text import render_refresh_only_text
from trainform.planner.drift import detect_drift
from trainform.planner.refresh_only import RefreshOnlyError, apply_refresh_only, plan_refresh_only
from trainform.planner.workspace import Workspace

from tests.engine.support import SpecFolder, run_trainform

QUEUE = "Queue/default-queue"
QUOTA = "Quota/research/research-default"


@pytest.fixture
def applied(quickstart: SpecFolder) -> SpecFolder:
    quickstart.converge()
    return quickstart


def workspace_of(folder: SpecFolder) -> Workspace:
    return Workspace(folder.root, folder.specs(), folder.backend(), folder.providers())


def edit_queue(folder: SpecFolder) -> None:
    live = folder.document_of(QUEUE)
    live["spec"]["pools"][0]["nominalQuota"]["cpu"] = "1"
    live["spec"]["defaultPriority"] = 5
    folder.set_document(QUEUE, live)


def test_nothing_drifted_means_nothing_to_accept(applied: SpecFolder) -> None:
    plan = plan_refresh_only(workspace_of(applied))

    assert not plan.has_changes
    assert render_refresh_only_text(plan).endswith("No changes. State matches the live platform.\n")


def test_a_hand_edit_is_accepted_into_state_and_drift_is_then_clean(
    applied: SpecFolder,
) -> None:
    edit_queue(applied)
    before = applied.state()
    assert before is not None
    rows_before = applied.rows_per_address()
    workspace = workspace_of(applied)

    plan = plan_refresh_only(workspace)

    assert [(u.address, u.action) for u in plan.updates] == [(QUEUE, "accept")]
    text = render_refresh_only_text(plan)
    assert "  ~ Queue/default-queue" in text
    assert "      ~ spec.defaultPriority: 100 -> 5" in text
    assert "      ~ spec.pools[0].nominalQuota.cpu: 2 -> 1" in text
    assert "Refresh-only plan: 1 resource to accept live values, 0 resources to forget." in text

    state = apply_refresh_only(workspace, plan)

    recorded = state.resources[QUEUE]
    assert recorded.spec["spec"]["defaultPriority"] == 5
    assert recorded.spec["spec"]["pools"][0]["nominalQuota"]["cpu"] == "1"
    assert recorded.spec_hash != before.resources[QUEUE].spec_hash
    others = {a: r.spec for a, r in before.resources.items() if a != QUEUE}
    assert {a: applied.state().resources[a].spec for a in others} == others  # type: ignore[union-attr]
    assert applied.rows_per_address() == rows_before  # no provider write
    assert not detect_drift(applied.state(), applied.providers()).drifted
    assert not plan_refresh_only(workspace_of(applied)).has_changes


def test_a_vanished_object_is_forgotten(applied: SpecFolder) -> None:
    applied.query("DELETE FROM objects WHERE address = ?", (QUOTA,))
    workspace = workspace_of(applied)

    plan = plan_refresh_only(workspace)

    assert [(u.address, u.action) for u in plan.updates] == [(QUOTA, "forget")]
    state = apply_refresh_only(workspace, plan)
    assert QUOTA not in state.resources
    assert json.loads(json.dumps(plan.to_json()))["updates"][0]["action"] == "forget"


def test_a_plan_older_than_state_is_refused_and_writes_nothing(applied: SpecFolder) -> None:
    edit_queue(applied)
    workspace = workspace_of(applied)
    plan = plan_refresh_only(workspace)
    applied.query("DELETE FROM objects WHERE address = ?", (QUOTA,))
    apply_refresh_only(workspace_of(applied), plan_refresh_only(workspace_of(applied)))
    serial = applied.state().serial  # type: ignore[union-attr]

    with pytest.raises(RefreshOnlyError, match="run it again"):
        apply_refresh_only(workspace, plan)
    assert applied.state().serial == serial  # type: ignore[union-attr]


def test_cli_shows_then_records_live_values_and_drift_is_clean(applied: SpecFolder) -> None:
    edit_queue(applied)
    applied.close()
    root = applied.root

    shown = run_trainform("plan", ".", "--refresh-only", "--detailed-exitcode", cwd=root)
    assert shown.returncode == 2, shown.stderr
    assert "      ~ spec.defaultPriority: 100 -> 5" in shown.stdout
    assert "No provider will be changed." in shown.stdout

    unconfirmed = run_trainform("apply", ".", "--refresh-only", cwd=root)
    assert unconfirmed.returncode == 1
    assert "refusing to record these live values in state without confirmation" in (
        unconfirmed.stderr
    )

    refused = run_trainform("apply", ".", "-refresh-only", "-target", QUEUE, cwd=root)
    assert refused.returncode == 1  # a usage error: exit 2 means changes in trainform
    assert "--refresh-only cannot be combined with --target" in refused.stderr

    accepted = run_trainform("apply", ".", "--refresh-only", "--auto-approve", cwd=root)
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.endswith(
        "Refresh complete: 1 state entry updated, no provider changed.\n"
    )
    assert run_trainform("drift", ".", cwd=root).returncode == 0
    header, blank, verdict = run_trainform("plan", ".", "--refresh-only", cwd=root).stdout.split(
        "\n", 2
    )
    assert header.startswith("Environment: dev, spec folder: ., state: ") and blank == ""
    assert verdict.startswith("No changes.")
    restore = run_trainform("plan", ".", "--detailed-exitcode", cwd=root)
    assert restore.returncode == 2  # the specs still declare 100: plan puts it back
    assert "spec.defaultPriority: 5 -> 100" in restore.stdout
    audit = json.loads(run_trainform("state", "audit", ".", "--format", "json", cwd=root).stdout)
    last = audit[-1] if isinstance(audit, list) else audit["records"][-1]
    assert last["operation"] == "apply-refresh-only"
    assert last["changes"] == [{"address": QUEUE, "action": "accept"}]
