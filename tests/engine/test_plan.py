"""make_plan on the quickstart: actions, their reasons, the guards, and saved plans.

Each test works on a private copy of examples/quickstart (fixture `quickstart`), edits its
specs or its platform database, and reads the plan the library returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from trainform.cli.render.plan_json import render_plan_json
from trainform.planner.apply import StalePlanError, apply_plan
from trainform.planner.errors import PlannerError
from trainform.planner.plan import PlanError
from trainform.planner.plan_model import Action, Plan, PlanFileError, ResourceChange
from trainform.planner.refresh import RefreshError
from trainform.planner.state import State
from trainform.providers.base import Observation, ObserveRequest
from trainform.providers.errors import TransientProviderError
from trainform.providers.local.provider import LocalProvider

from tests.engine.support import SpecFolder, project, write_folder

QUEUE = "Queue/default-queue"
QUOTA = "Quota/research/research-default"
POOL = "ResourcePool/this-machine"
PROJECT = "Project/research"
HELDOUT = "Dataset/heldout"
JOB = "TrainingJob/research/bigram"

SCRATCH_DATASET = """\
apiVersion: trainform/v1
kind: Dataset
metadata: {name: scratch}
spec:
  source: data/scratch
  format: text
  versions: [{name: v1}]
  deletionPolicy: POLICY
"""


def change_of(plan: Plan, address: str) -> ResourceChange:
    return next(change for change in plan.changes if change.address == address)


def actions(plan: Plan) -> dict[str, Action]:
    return {change.address: change.action for change in plan.actionable}


# creating and converging ---------------------------------------------------------------


def test_an_empty_state_plans_every_reconciled_resource_for_creation(
    quickstart: SpecFolder,
) -> None:
    plan = quickstart.plan()

    assert actions(plan) == {a: Action.CREATE for a in quickstart.reconciled_addresses()}
    assert len(plan.actionable) == 8
    assert all(change.reasons == ["not yet created"] for change in plan.actionable)
    assert plan.lineage is None and plan.serial == 0
    assert change_of(plan, HELDOUT).known_after_apply == ["versions"]
    assert plan.findings == []


def test_apply_then_plan_has_no_changes(quickstart: SpecFolder) -> None:
    quickstart.converge()

    plan = quickstart.plan()

    assert not plan.has_changes
    assert plan.summary()["no-op"] == 8
    state = quickstart.state()
    assert state is not None
    assert set(state.resources) == quickstart.reconciled_addresses()
    assert plan.lineage == state.lineage and plan.serial == state.serial


def test_another_spelling_of_the_same_quantity_is_no_change(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.edit(
        "specs/platform.yaml",
        "nominalQuota: {cpu: 2, memory: 4Gi}",
        "nominalQuota: {cpu: 2000m, memory: 4096Mi}",
    )
    quickstart.edit("specs/platform.yaml", "maxRuntime: 2h", "maxRuntime: 120m")

    assert not quickstart.plan().has_changes


# updates, replacements, deletes ---------------------------------------------------------


def test_a_changed_quota_is_an_update_whose_reason_names_the_field(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")

    plan = quickstart.plan()

    assert actions(plan) == {QUEUE: Action.UPDATE}
    change = change_of(plan, QUEUE)
    assert change.reasons == ["spec.pools[0].nominalQuota.cpu: 2 -> 1"]
    assert [(c.path, c.before, c.after, c.forces_replacement) for c in change.changes] == [
        ("spec.pools[0].nominalQuota.cpu", "2", "1", False)
    ]


def test_an_update_is_applied_in_place(quickstart: SpecFolder) -> None:
    quickstart.converge()
    (created,) = quickstart.query(
        "SELECT rowid, generation FROM objects WHERE address = ?", (QUEUE,)
    )
    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")

    quickstart.converge()

    (updated,) = quickstart.query(
        "SELECT rowid, generation FROM objects WHERE address = ?", (QUEUE,)
    )
    assert updated["rowid"] == created["rowid"]
    assert updated["generation"] == created["generation"] + 1
    assert quickstart.document_of(QUEUE)["spec"]["pools"][0]["nominalQuota"]["cpu"] == "1"
    assert not quickstart.plan().has_changes


def test_a_changed_dataset_source_forces_replacement(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.edit("specs/data.yaml", "source: data/heldout", "source: data/tiny-corpus")

    plan = quickstart.plan()

    assert actions(plan) == {HELDOUT: Action.REPLACE}
    assert change_of(plan, HELDOUT).reasons == [
        "spec.source: data/heldout -> data/tiny-corpus (forces replacement)"
    ]
    quickstart.apply(plan)
    assert (quickstart.root / "data" / "heldout" / "v1" / "heldout.txt").is_file()
    assert quickstart.document_of(HELDOUT)["spec"]["source"] == "data/tiny-corpus"
    assert not quickstart.plan().has_changes


def test_a_resource_removed_from_the_specs_is_deleted(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.drop_document("specs/platform.yaml", "Quota", "research-default")

    plan = quickstart.plan()

    assert actions(plan) == {QUOTA: Action.DELETE}
    change = change_of(plan, QUOTA)
    assert change.reasons == ["no longer in the specs"]
    assert change.data_kept is False
    quickstart.apply(plan)
    assert QUOTA not in quickstart.rows_per_address()
    assert not quickstart.plan().has_changes


@pytest.mark.parametrize(
    ("policy", "reasons", "data_kept"),
    [
        pytest.param(
            "Abandon",
            ["no longer in the specs", "deletionPolicy Abandon: the data itself is kept"],
            True,
            id="abandon",
        ),
        pytest.param("Delete", ["no longer in the specs"], False, id="delete"),
    ],
)
def test_a_dataset_removed_from_the_specs_keeps_its_data_unless_asked(
    quickstart: SpecFolder, policy: str, reasons: list[str], data_kept: bool
) -> None:
    quickstart.write("data/scratch/v1/part.txt", "scratch data\n")
    quickstart.write("specs/scratch.yaml", SCRATCH_DATASET.replace("POLICY", policy))
    quickstart.converge()
    (quickstart.root / "specs" / "scratch.yaml").unlink()

    plan = quickstart.plan()

    assert actions(plan) == {"Dataset/scratch": Action.DELETE}
    change = change_of(plan, "Dataset/scratch")
    assert change.reasons == reasons
    assert change.data_kept is data_kept
    quickstart.apply(plan)
    assert (quickstart.root / "data" / "scratch" / "v1" / "part.txt").exists() is data_kept
    assert "Dataset/scratch" not in quickstart.rows_per_address()


# guards -------------------------------------------------------------------------------

PROTECTED_HELDOUT = (
    "  name: heldout\nspec:",
    "  name: heldout\nlifecycle: {preventDestroy: true}\nspec:",
)


def test_prevent_destroy_blocks_a_replacement(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.edit("specs/data.yaml", *PROTECTED_HELDOUT)
    quickstart.edit("specs/data.yaml", "source: data/heldout", "source: data/tiny-corpus")

    with pytest.raises(PlanError) as raised:
        quickstart.plan()

    (problem,) = raised.value.problems
    assert problem.startswith(f"{HELDOUT} (")
    assert "lifecycle.preventDestroy is set, but the plan would replace it" in problem
    assert "spec.source: data/heldout -> data/tiny-corpus" in problem


def test_prevent_destroy_allows_an_update_in_place(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.edit("specs/data.yaml", *PROTECTED_HELDOUT)
    quickstart.edit(
        "specs/data.yaml",
        "  versions:\n    - name: v1\n---",
        "  versions:\n    - name: v1\n  readers: [research]\n---",
    )

    assert actions(quickstart.plan()) == {HELDOUT: Action.UPDATE}


def test_prevent_destroy_blocks_a_destroy_plan(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.edit("specs/data.yaml", *PROTECTED_HELDOUT)

    with pytest.raises(PlanError, match="lifecycle.preventDestroy"):
        quickstart.plan(destroy=True)


def test_a_target_limits_the_plan_to_it_and_its_dependencies(quickstart: SpecFolder) -> None:
    plan = quickstart.plan(targets=(QUOTA,))

    assert actions(plan) == {a: Action.CREATE for a in (PROJECT, POOL, QUEUE, QUOTA)}
    assert plan.targets == [QUOTA]


def test_a_target_leaves_other_changes_out(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")
    quickstart.edit("specs/data.yaml", "source: data/heldout", "source: data/tiny-corpus")

    assert actions(quickstart.plan(targets=(QUEUE,))) == {QUEUE: Action.UPDATE}
    assert actions(quickstart.plan(targets=(HELDOUT,))) == {HELDOUT: Action.REPLACE}


def test_an_unknown_target_is_an_error(quickstart: SpecFolder) -> None:
    with pytest.raises(PlanError, match="--target Queue/nope: no such resource"):
        quickstart.plan(targets=("Queue/nope",))


@pytest.mark.parametrize(
    ("declared", "removed", "blocked"),
    [
        pytest.param(8, 5, True, id="5-of-8"),
        pytest.param(10, 6, True, id="6-of-10"),
        pytest.param(10, 5, False, id="5-of-10-is-half"),
        pytest.param(6, 4, False, id="4-of-6-fewer-than-5-deletes"),
    ],
)
def test_a_plan_deleting_most_of_the_platform_needs_allow_mass_delete(
    tmp_path: Path, declared: int, removed: int, blocked: bool
) -> None:
    names = [f"team-{index}" for index in range(declared)]
    folder = SpecFolder(
        write_folder(tmp_path / "many", {f"specs/{n}.yaml": project(n) for n in names})
    )
    try:
        folder.converge()
        for name in names[:removed]:
            (folder.root / "specs" / f"{name}.yaml").unlink()

        if blocked:
            with pytest.raises(PlanError, match="--allow-mass-delete") as raised:
                folder.plan()
            assert f"the plan deletes {removed} of {declared} resources" in str(raised.value)
        else:
            assert folder.plan().summary()["delete"] == removed
        assert folder.plan(allow_mass_delete=True).summary()["delete"] == removed
    finally:
        folder.close()


def test_a_destroy_plan_is_not_a_mass_delete(quickstart: SpecFolder) -> None:
    quickstart.converge()

    plan = quickstart.plan(destroy=True)

    assert actions(plan) == {a: Action.DELETE for a in quickstart.reconciled_addresses()}


# refresh ------------------------------------------------------------------------------


class FailingObserve(LocalProvider):
    failure: ClassVar[BaseException] = TransientProviderError("throttled")

    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        raise self.failure


class ForgetfulObserve(LocalProvider):
    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        return dict(list(super().observe(requests).items())[1:])


def failing(failure: BaseException) -> type[LocalProvider]:
    return type("Failing", (FailingObserve,), {"failure": failure})


@pytest.mark.parametrize(
    ("provider_class", "words"),
    [
        pytest.param(failing(TransientProviderError("throttled")), "throttled", id="transient"),
        pytest.param(failing(PermissionError("access denied")), "PermissionError", id="permission"),
        pytest.param(failing(TimeoutError("timed out")), "TimeoutError: timed out", id="timeout"),
        pytest.param(ForgetfulObserve, "no observation returned for", id="missing-answer"),
    ],
)
def test_a_failed_observe_stops_the_plan_instead_of_planning_deletes(
    quickstart: SpecFolder, provider_class: type[LocalProvider], words: str
) -> None:
    quickstart.converge()
    state_before = quickstart.state()
    rows_before = quickstart.rows_per_address()

    with pytest.raises(RefreshError) as raised:
        quickstart.plan(quickstart.providers(provider_class))

    message = str(raised.value)
    assert message.startswith("cannot refresh: ")
    assert "\n  provider `local` (local): " in message
    assert words in message
    assert "Nothing was planned from a failed read" in message
    state_after = quickstart.state()
    assert state_before is not None and state_after is not None
    assert state_after.to_json() == state_before.to_json()
    assert quickstart.rows_per_address() == rows_before


def test_without_refresh_a_failing_provider_is_not_asked(quickstart: SpecFolder) -> None:
    quickstart.converge()

    plan = quickstart.plan(quickstart.providers(failing(TimeoutError())), refresh=False)

    assert not plan.has_changes


# changes made outside trainform ---------------------------------------------------------


def test_a_change_made_outside_trainform_is_planned_back(quickstart: SpecFolder) -> None:
    quickstart.converge()
    live = quickstart.document_of(QUEUE)
    live["spec"]["pools"][0]["nominalQuota"]["cpu"] = "1"
    quickstart.set_document(QUEUE, live)

    plan = quickstart.plan()

    assert actions(plan) == {QUEUE: Action.UPDATE}
    assert change_of(plan, QUEUE).reasons == [
        "modified outside trainform: spec.pools[0].nominalQuota.cpu",
        "spec.pools[0].nominalQuota.cpu: 1 -> 2",
    ]
    quickstart.apply(plan)
    assert quickstart.document_of(QUEUE)["spec"]["pools"][0]["nominalQuota"]["cpu"] == "2"
    assert not quickstart.plan().has_changes


def test_an_object_deleted_outside_trainform_is_recreated(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.query("DELETE FROM objects WHERE address = ?", (QUOTA,))

    plan = quickstart.plan()

    assert actions(plan) == {QUOTA: Action.CREATE}
    assert change_of(plan, QUOTA).reasons == ["missing on the provider: deleted outside trainform"]
    quickstart.apply(plan)
    assert quickstart.rows_per_address()[QUOTA] == 1


def test_an_object_on_the_provider_but_not_in_state_is_adopted(quickstart: SpecFolder) -> None:
    quickstart.converge()
    backend = quickstart.backend()
    state = backend.read()
    assert state is not None
    backend.record(state, {"type": "outcome", "address": QUOTA, "resource": None})
    backend.compact(state)

    plan = quickstart.plan()

    assert actions(plan) == {QUOTA: Action.CREATE}
    assert change_of(plan, QUOTA).reasons == [
        "exists on the provider but not in state: adopting it"
    ]
    quickstart.apply(plan)
    assert quickstart.rows_per_address()[QUOTA] == 1
    assert not quickstart.plan().has_changes


# saved plans --------------------------------------------------------------------------


def saved(plan: Plan, root: Path) -> Path:
    path = root.parent / "saved.tfplan.json"
    path.write_bytes(plan.to_file_bytes(root.resolve()))
    return path


def test_a_saved_plan_reads_back_as_the_same_plan(quickstart: SpecFolder) -> None:
    plan = quickstart.plan()

    loaded, spec_root = Plan.from_file(str(saved(plan, quickstart.root)))

    assert loaded.to_json() == plan.to_json()
    assert spec_root == quickstart.root.resolve()


def test_a_saved_plan_is_refused_once_the_state_changed(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")
    path = saved(quickstart.plan(), quickstart.root)
    quickstart.converge()
    loaded, _ = Plan.from_file(str(path))

    with pytest.raises(StalePlanError) as raised:
        quickstart.apply(loaded)

    assert "state changed since the plan was made (serial 16 -> 18)" in str(raised.value)
    assert str(raised.value).endswith("Create a new plan")


def test_a_plan_made_before_any_state_is_refused_once_state_exists(quickstart: SpecFolder) -> None:
    plan = quickstart.plan()
    quickstart.converge()

    with pytest.raises(StalePlanError, match="made before any state existed"):
        quickstart.apply(plan)


def test_a_plan_of_another_state_lineage_is_refused(quickstart: SpecFolder) -> None:
    quickstart.converge()
    plan = quickstart.plan(destroy=True)
    backend = quickstart.backend()
    other = State.new()
    other.serial = plan.serial
    backend.compact(other)

    with pytest.raises(StalePlanError, match=f"belongs to state lineage {plan.lineage}"):
        apply_plan(plan, backend, quickstart.providers())


def test_a_plan_made_by_another_version_is_refused(quickstart: SpecFolder) -> None:
    plan = quickstart.plan()
    plan.tool_version = "0.0.1"

    with pytest.raises(StalePlanError, match="made by trainform 0.0.1"):
        quickstart.apply(plan)


def tamper(raw: bytes, old: bytes, new: bytes) -> bytes:
    assert raw.count(old) >= 1 and len(old) == len(new)
    return raw.replace(old, new, 1)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        pytest.param(
            lambda raw: tamper(raw, b'"cpu": "2"', b'"cpu": "8"'),
            "its checksum does not match its content",
            id="one-byte-of-a-value",
        ),
        pytest.param(
            lambda raw: tamper(raw, b'"action": "create"', b'"action": "delete"'),
            "its checksum does not match its content",
            id="an-action",
        ),
        pytest.param(lambda raw: raw[: len(raw) // 2], "not a plan file", id="truncated"),
        pytest.param(
            lambda raw: json.dumps({**json.loads(raw), "checksum": None}).encode(),
            "its checksum does not match its content",
            id="checksum-removed",
        ),
    ],
)
def test_an_altered_plan_file_is_refused(quickstart: SpecFolder, edit: Any, words: str) -> None:
    path = saved(quickstart.plan(), quickstart.root)
    path.write_bytes(edit(path.read_bytes()))

    with pytest.raises(PlanFileError) as raised:
        Plan.from_file(str(path))

    assert type(raised.value) is PlanFileError
    assert words in str(raised.value)


def test_the_json_plan_is_byte_identical_for_the_same_inputs(quickstart: SpecFolder) -> None:
    first, second = quickstart.plan(), quickstart.plan()
    assert render_plan_json(first) == render_plan_json(second)
    assert first.to_file_bytes(quickstart.root) == second.to_file_bytes(quickstart.root)

    quickstart.converge()
    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")
    assert render_plan_json(quickstart.plan()) == render_plan_json(quickstart.plan())


def test_the_json_plan_names_no_spec_root_but_a_saved_plan_does(quickstart: SpecFolder) -> None:
    plan = quickstart.plan()

    assert "specRoot" not in json.loads(render_plan_json(plan))
    assert json.loads(plan.to_file_bytes(quickstart.root))["specRoot"] == str(quickstart.root)


def test_plan_errors_are_planner_errors() -> None:
    assert issubclass(PlanError, PlannerError)
    assert issubclass(RefreshError, PlannerError)
    assert issubclass(StalePlanError, PlanFileError)
