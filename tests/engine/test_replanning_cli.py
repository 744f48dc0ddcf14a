"""Overlapping pull requests merged one after the other, through the installed `trainform`:
`apply --replan-if-same-changes`, `plan-diff`, `plan-overlap` and the bindings `show`
prints, with their exit codes and messages.

One spec folder plays main: a branch's plan is made with its edit in place, then the edit
is undone; a merge puts it back and applies the branch's reviewed plan.
"""

from __future__ import annotations

import json
import subprocess

from tests.engine.support import SpecFolder, run_trainform

PLATFORM = "specs/platform.yaml"
QUOTA = "Quota/research/research-default"


def trainform(folder: SpecFolder, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = run_trainform(*args, cwd=folder.root)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert result.returncode == code, (
        f"trainform {' '.join(args)} exited {result.returncode}:\n{output}"
    )
    return result


def branch_plan(folder: SpecFolder, old: str, new: str, out: str) -> None:
    folder.edit(PLATFORM, old, new)
    trainform(folder, "plan", ".", "-out", out)
    folder.edit(PLATFORM, new, old)


def running_jobs(folder: SpecFolder) -> int:
    return int(folder.document_of(QUOTA)["spec"]["limits"]["runningJobs"])


def test_overlapping_plans_apply_when_they_commute_and_refuse_with_both_values_when_not(
    quickstart: SpecFolder,
) -> None:
    quickstart.converge()
    branch_plan(quickstart, "defaultPriority: 100", "defaultPriority: 200", "a.tfplan")
    branch_plan(quickstart, "runningJobs: 2", "runningJobs: 3", "b.tfplan")
    serial_planned = quickstart.state().serial  # type: ignore[union-attr]

    shown = trainform(quickstart, "show", "b.tfplan").stdout
    assert f"state serial           {serial_planned}\n" in shown
    assert "specs digest           sha256:" in shown and "signed                 no" in shown

    quickstart.edit(PLATFORM, "defaultPriority: 100", "defaultPriority: 200")  # merge a
    first = trainform(quickstart, "apply", "--replan-if-same-changes", "a.tfplan")
    assert first.stdout.startswith("The reviewed plan a.tfplan is fresh")
    quickstart.edit(PLATFORM, "runningJobs: 2", "runningJobs: 3")  # merge b: stale, commutes
    second = trainform(quickstart, "apply", "--replan-if-same-changes", "b.tfplan")
    serial_now = quickstart.state().serial  # type: ignore[union-attr]
    assert "is stale, and the fresh plan makes the same changes" in second.stdout
    assert f"  serial: {serial_planned} -> " in second.stdout
    assert "  specs: sha256:" in second.stdout
    assert "Apply complete: 1 change applied." in second.stdout
    assert running_jobs(quickstart) == 3 and serial_now > serial_planned

    branch_plan(quickstart, "runningJobs: 3", "runningJobs: 4", "c.tfplan")
    branch_plan(quickstart, "runningJobs: 3", "runningJobs: 5", "d.tfplan")
    overlap = trainform(quickstart, "plan-overlap", "d.tfplan", "--held-by", "#3=c.tfplan", code=4)
    assert "#3 holds 1 resource that d.tfplan changes too" in overlap.stdout
    assert f"  {QUOTA}: update here, update in #3" in overlap.stdout

    quickstart.edit(PLATFORM, "runningJobs: 3", "runningJobs: 4")  # merge c
    trainform(quickstart, "apply", "--replan-if-same-changes", "c.tfplan")
    quickstart.edit(PLATFORM, "runningJobs: 4", "runningJobs: 5")  # merge d: conflicts
    serial_before = quickstart.state().serial  # type: ignore[union-attr]
    refused = trainform(
        quickstart,
        "apply",
        "--replan-if-same-changes",
        "d.tfplan",
        "--save-fresh-plan",
        "fresh.tfplan",
        code=4,
    )
    assert "is stale, and the fresh plan makes different changes (1 difference)" in refused.stdout
    assert f"{QUOTA} spec.limits.runningJobs: reviewed 3 -> 5, now 4 -> 5" in refused.stdout
    assert "Nothing was applied: the fresh plan needs its own review (exit 4)." in refused.stderr
    assert running_jobs(quickstart) == 4
    assert quickstart.state().serial == serial_before  # type: ignore[union-attr]

    compared = trainform(
        quickstart, "plan-diff", "d.tfplan", "fresh.tfplan", "--format", "json", code=4
    )
    body = json.loads(compared.stdout)
    assert body["outcome"] == "different" and body["stale"][0]["binding"] == "serial"
    assert body["differences"] == [
        {
            "address": QUOTA,
            "what": "field",
            "path": "spec.limits.runningJobs",
            "reviewed": {"before": 3, "after": 5},
            "now": {"before": 4, "after": 5},
        }
    ]
    trainform(quickstart, "apply", "fresh.tfplan")  # the approved fresh plan
    assert running_jobs(quickstart) == 5
