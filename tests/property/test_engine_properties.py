"""Properties of the engine: diffs, plan determinism, apply-then-plan, and apply order.

Platforms are generated small and valid by construction on the local provider (pools of
this machine: 1 CPU, 1Gi, 1 node): projects, pools, queues over some pools, and quotas of
projects on queues. Each example gets a fresh folder from tmp_path_factory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainform.cli.render.plan_json import render_plan_json
from trainform.planner.diff import _walk, diff_documents
from trainform.planner.plan import order_changes
from trainform.planner.plan_model import Action, Plan, ResourceChange

from tests.engine.support import SpecFolder, write_folder

PLATFORM_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
PURE_SETTINGS = settings(max_examples=200, deadline=None)

PROJECTS = ("vision", "speech", "robotics")
POOLS = ("pool-a", "pool-b")
QUEUES = ("batch", "interactive", "research")
CPU = st.sampled_from(["1", "500m", "250m"])
MEMORY = st.sampled_from(["1Gi", "512Mi", "1024Mi"])


def document(kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> str:
    """JSON is YAML: one document per resource, written with json.dumps."""
    return json.dumps(
        {"apiVersion": "trainform/v1", "kind": kind, "metadata": metadata, "spec": spec}
    )


@st.composite
def platforms(draw: st.DrawFn) -> dict[str, str]:
    """{file name: YAML} of a valid platform on the local provider."""
    projects = draw(st.lists(st.sampled_from(PROJECTS), min_size=1, max_size=3, unique=True))
    pools = draw(st.lists(st.sampled_from(POOLS), min_size=1, max_size=2, unique=True))
    queues = draw(st.lists(st.sampled_from(QUEUES), min_size=0, max_size=3, unique=True))
    documents = [
        document("Project", {"name": name}, {"owners": [f"{name}@example.com"]})
        for name in projects
    ]
    documents += [
        document(
            "ResourcePool",
            {"name": name},
            {"provider": "local", "nodes": 1, "cpu": draw(CPU), "memory": draw(MEMORY)},
        )
        for name in pools
    ]
    for name in queues:
        used = draw(st.lists(st.sampled_from(pools), min_size=1, unique=True))
        spec: dict[str, Any] = {
            "pools": [
                {"pool": pool, "nominalQuota": {"cpu": draw(CPU), "memory": draw(MEMORY)}}
                for pool in used
            ],
            "defaultPriority": draw(st.integers(-10, 10)),
        }
        if draw(st.booleans()):
            spec["maxRuntime"] = draw(st.sampled_from(["2h", "90m", "1d"]))
        documents.append(document("Queue", {"name": name}, spec))
    if queues:
        pairs = draw(
            st.lists(
                st.tuples(st.sampled_from(projects), st.sampled_from(queues)),
                max_size=3,
                unique_by=lambda pair: pair[0],
            )
        )
        for project, queue in pairs:
            limits = {"cpu": draw(CPU), "runningJobs": draw(st.integers(0, 4))}
            documents.append(
                document(
                    "Quota",
                    {"name": f"{project}-quota", "project": project},
                    {"queue": queue, "limits": limits},
                )
            )
    files = {f"specs/platform-{index}.yaml": text for index, text in enumerate(documents)}
    return files


def write_platform(root: Path, files: dict[str, str]) -> SpecFolder:
    specs = root / "specs"
    if specs.exists():
        for path in specs.iterdir():
            path.unlink()
    return SpecFolder(write_folder(root, files))


def assert_topological(plan: Plan) -> None:
    """Creates and updates after what they depend on; deletes before what they depended on."""
    index = {change.address: i for i, change in enumerate(plan.actionable)}
    for change in plan.actionable:
        if change.action is Action.DELETE:
            for dependency in change.previous_dependencies:
                if dependency in index and plan.changes[index[dependency]].action is Action.DELETE:
                    assert index[change.address] < index[dependency], (change.address, dependency)
        else:
            for dependency in change.dependencies:
                if dependency in index:
                    assert index[dependency] < index[change.address], (dependency, change.address)


@PLATFORM_SETTINGS
@given(first=platforms(), second=platforms())
def test_apply_then_plan_is_empty_across_any_two_platforms(
    tmp_path_factory: pytest.TempPathFactory, first: dict[str, str], second: dict[str, str]
) -> None:
    root = tmp_path_factory.mktemp("platform")
    folder = write_platform(root, first)
    try:
        plan = folder.plan()
        assert render_plan_json(plan) == render_plan_json(folder.plan())
        assert_topological(plan)
        folder.converge()
        assert not folder.plan().has_changes

        folder = write_platform(root, second)
        plan = folder.plan(allow_mass_delete=True)
        assert render_plan_json(plan) == render_plan_json(folder.plan(allow_mass_delete=True))
        assert_topological(plan)
        folder.converge(allow_mass_delete=True)
        after = folder.plan()
        assert not after.has_changes, [(c.address, c.reasons) for c in after.actionable]
        state = folder.state()
        assert state is not None and set(state.resources) == folder.reconciled_addresses()
        assert set(folder.rows_per_address()) == folder.reconciled_addresses()

        destroy = folder.plan(destroy=True)
        assert_topological(destroy)
        assert {c.action for c in destroy.actionable} <= {Action.DELETE}
    finally:
        folder.close()


# pure properties ------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)


@PURE_SETTINGS
@given(value=st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=4))
def test_a_diff_of_a_document_with_itself_is_empty(value: dict[str, Any]) -> None:
    assert diff_documents(value, json.loads(json.dumps(value))) == []


@PURE_SETTINGS
@given(
    before=st.dictionaries(st.sampled_from("abc"), JSON_VALUES, max_size=3),
    after=st.dictionaries(st.sampled_from("abc"), JSON_VALUES, max_size=3),
)
def test_a_diff_is_empty_exactly_when_the_documents_are_equal(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    assert (diff_documents(before, after) == []) == (without_nulls(before) == without_nulls(after))


NUMBERS = st.one_of(st.booleans(), st.integers(-2, 2), st.sampled_from([0.0, 1.0, -1.0, 2.0]))
SHAPED = st.recursive(
    NUMBERS | st.none() | st.sampled_from(["", "a"]),
    lambda children: st.lists(children, max_size=2)
    | st.dictionaries(st.sampled_from("ab"), children, max_size=2),
    max_leaves=6,
)


@PURE_SETTINGS
@given(
    before=st.dictionaries(st.sampled_from("ab"), SHAPED, max_size=2),
    after=st.dictionaries(st.sampled_from("ab"), SHAPED, max_size=2),
)
def test_the_shortcut_for_equal_documents_changes_no_diff(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    """1 == 1.0 == True in Python; the diff still reports a change of type."""
    walked: list[tuple[str, Any, Any]] = []
    _walk(before, after, "", walked)
    assert [(c.path, c.before, c.after) for c in diff_documents(before, after)] == walked


def without_nulls(value: Any) -> Any:
    """Documents compare with unset and null fields alike, as normalization makes them."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


CONSTRUCTIVE = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.RESUME, Action.EVALUATE)


Spec = tuple[str, str, list[str], list[str]]  # address, action, dependencies, previous


@st.composite
def change_sets(draw: st.DrawFn) -> list[Spec]:
    """Changes over R/0..R/n-1 whose old and new dependencies point to lower numbers."""
    count = draw(st.integers(1, 12))
    specs = []
    for index in range(count):
        action = draw(st.sampled_from([a.value for a in Action]))
        lower = [f"R/{i:02d}" for i in range(index)]
        now = draw(st.lists(st.sampled_from(lower), unique=True)) if lower else []
        before = draw(st.lists(st.sampled_from(lower), unique=True)) if lower else []
        specs.append(
            (
                f"R/{index:02d}",
                action,
                [] if action == Action.DELETE.value else now,
                [] if action == Action.CREATE.value else before,
            )
        )
    return draw(st.permutations(specs))


def build(specs: list[Spec]) -> list[ResourceChange]:
    return [
        ResourceChange(
            address,
            "Thing",
            Action(action),
            ["local"],
            dependencies=now,
            previous_dependencies=before,
        )
        for address, action, now, before in specs
    ]


@PURE_SETTINGS
@given(specs=change_sets())
def test_order_changes_puts_dependencies_first_and_deletes_in_reverse(specs: list[Spec]) -> None:
    changes = build(specs)
    ordered = order_changes(changes)
    index = {change.address: i for i, change in enumerate(ordered)}
    by_address = {change.address: change for change in changes}

    assert sorted(index) == sorted(by_address)
    actionable = [c for c in ordered if c.action is not Action.NOOP]
    assert ordered[: len(actionable)] == actionable
    for change in actionable:
        for dependency in change.dependencies:
            if change.action in CONSTRUCTIVE and by_address[dependency].action in CONSTRUCTIVE:
                assert index[dependency] < index[change.address]
        for dependency in change.previous_dependencies:
            if by_address[dependency].action is Action.DELETE:
                assert index[change.address] < index[dependency]


@PURE_SETTINGS
@given(specs=change_sets())
def test_order_changes_is_independent_of_input_order(specs: list[Spec]) -> None:
    forward = [c.address for c in order_changes(build(specs))]
    backward = [c.address for c in order_changes(build(list(reversed(specs))))]
    assert forward == backward
