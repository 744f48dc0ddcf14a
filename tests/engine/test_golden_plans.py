"""Golden plans: the quickstart in a known state, edited one way, must plan exactly as recorded.

A case is `tests/golden/plans/<case>/` holding the expected plan as text (`plan.txt`, no
colour), Markdown (`plan.md`) and JSON (`plan.json`). The case's inputs are the quickstart
example plus what `CASES` below does to it: whether it is applied first and how its specs
or its platform database are then changed. `pytest --update-golden` rewrites the expected
files from the current output; review the diff before committing it.

Kept stable: specs are loaded from inside the copy (`specs/platform.yaml:20:1`, not an
absolute path), prior state gets a fixed lineage, the tool version is pinned, so a
release does not rewrite every case, and the state location is shown relative to the copy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from trainform.cli.render.plan_json import render_plan_json
from trainform.cli.render.plan_markdown import render_plan_markdown
from trainform.cli.render.plan_text import render_plan_text
from trainform.planner.state import State

from tests.engine.support import QUICKSTART, SpecFolder, copy_example

CASES_DIR = Path(__file__).resolve().parents[1] / "golden" / "plans"
LINEAGE = "00000000-0000-4000-8000-000000000000"
TOOL_VERSION = "0.0.0+golden"
RENDERERS = {
    "plan.txt": render_plan_text,
    "plan.md": render_plan_markdown,
    "plan.json": render_plan_json,
}


def change_queue_quota(folder: SpecFolder) -> None:
    folder.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")


def move_heldout(folder: SpecFolder) -> None:
    folder.edit("specs/data.yaml", "source: data/heldout", "source: data/tiny-corpus")


def drop_quota(folder: SpecFolder) -> None:
    folder.drop_document("specs/platform.yaml", "Quota", "research-default")


def edit_queue_by_hand(folder: SpecFolder) -> None:
    live = folder.document_of("Queue/default-queue")
    live["spec"]["defaultPriority"] = 5
    folder.set_document("Queue/default-queue", live)


def nothing(folder: SpecFolder) -> None:
    return None


@dataclass(frozen=True)
class Case:
    applied_first: bool
    change: Callable[[SpecFolder], None]
    destroy: bool = False


CASES = {
    "quickstart-create": Case(applied_first=False, change=nothing),
    "quickstart-update": Case(applied_first=True, change=change_queue_quota),
    "quickstart-replace": Case(applied_first=True, change=move_heldout),
    "quickstart-delete": Case(applied_first=True, change=drop_quota),
    "quickstart-modified-outside": Case(applied_first=True, change=edit_queue_by_hand),
    "quickstart-destroy": Case(applied_first=True, change=nothing, destroy=True),
}


def check_golden(path: Path, actual: str, update: bool) -> None:
    if update or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        if not update:
            pytest.fail(f"{path} did not exist; written, review it and run again")
        return
    assert actual == path.read_text(encoding="utf-8"), f"{path} differs; see the diff above"


@pytest.mark.parametrize("case", sorted(CASES))
def test_plan_matches_golden(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, update_golden: bool
) -> None:
    spec = CASES[case]
    copy_example(QUICKSTART, tmp_path / "quickstart")
    monkeypatch.chdir(tmp_path / "quickstart")
    monkeypatch.setenv("NO_COLOR", "1")
    folder = SpecFolder(Path("."))
    try:
        if spec.applied_first:
            folder.backend().compact(State(lineage=LINEAGE))
            folder.converge()
        spec.change(folder)
        plan = folder.plan(destroy=spec.destroy)
    finally:
        folder.close()
    plan.tool_version = TOOL_VERSION
    plan.state_location = os.path.relpath(plan.state_location)  # not the temporary folder

    for name, render in RENDERERS.items():
        check_golden(CASES_DIR / case / name, render(plan), update_golden)


def test_every_golden_case_folder_has_a_case() -> None:
    folders = {path.name for path in CASES_DIR.iterdir() if path.is_dir()}
    assert folders <= set(CASES), f"stale golden folders: {sorted(folders - set(CASES))}"
