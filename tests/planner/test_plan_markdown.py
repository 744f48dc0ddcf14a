"""Markdown plans for pull requests: within the size budget, whole resources only, always
valid Markdown (every fence and <details> closed), diff markers in column 0, the header and
the summary first."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from trainform.cli.render.plan_markdown import MIN_BUDGET, code_span, render_plan_markdown
from trainform.planner.diff import FieldChange
from trainform.planner.plan_model import Action, Plan, ResourceChange

HOSTILE = ["```", "````", "</details>", "<details>", "`", "| a |", "\n", "~~~"]


def make_plan(values: list[str], actions: list[Action]) -> Plan:
    changes = []
    for index, (value, action) in enumerate(zip(values, actions, strict=False)):
        address = f"Queue/q{index:04d}"
        if action is Action.CREATE:
            change = ResourceChange(
                address, "Queue", action, ["local"], after={"spec": {"v": value}}
            )
        elif action is Action.DELETE:
            change = ResourceChange(address, "Queue", action, ["local"], before={"spec": {}})
        else:
            field = FieldChange("spec.v", "old", value, action is Action.REPLACE)
            change = ResourceChange(address, "Queue", action, ["local"], changes=[field])
        change.reasons = [f"because {value}"]
        changes.append(change)
    return Plan(
        tool_version="0",
        lineage=None,
        serial=0,
        spec_digest="",
        lock_digest="",
        config={},
        refresh=False,
        changes=changes,
        environment="staging",
        spec_folder="platform",
        state_location="/state/staging.json",
    )


def fence_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.fullmatch(r"`{3,}(diff)?", line)]


def check_valid(text: str, budget: int) -> None:
    assert len(text) <= budget
    fences = fence_lines(text)
    assert len(fences) % 2 == 0
    lines = text.splitlines()
    assert lines[0] == "### trainform plan: environment `staging`, folder `platform`"
    assert lines[2].startswith("**Plan: ") or lines[2].startswith("**No changes.")
    outside = text
    if fences:
        fence = fences[1]
        outside = text.split(fence + "diff\n", 1)[0] + text.split("\n" + fence + "\n", 1)[-1]
    assert outside.count("<details>") == outside.count("</details>") <= 1
    if fences:
        opening = lines.index(fences[0])
        closing = len(lines) - 1 - lines[::-1].index(fences[0].removesuffix("diff"))
        for line in lines[opening + 1 : closing]:
            assert line == "" or line[0] in "#+-! ", line


values = st.lists(
    st.one_of(st.sampled_from(HOSTILE), st.text(min_size=0, max_size=300)), max_size=60
)
actions = st.lists(
    st.sampled_from([Action.CREATE, Action.UPDATE, Action.REPLACE, Action.DELETE]), max_size=60
)


@settings(max_examples=150, deadline=None)
@given(values, actions, st.integers(MIN_BUDGET, 20_000), st.text(max_size=3000))
def test_markdown_stays_within_budget_and_valid(
    texts: list[str], kinds: list[Action], budget: int, policies: str
) -> None:
    plan = make_plan(texts, kinds)
    text = render_plan_markdown(plan, policies=policies, budget=budget)
    check_valid(text, budget)


def test_resources_are_left_out_whole_from_the_end_with_a_note() -> None:
    plan = make_plan(["x" * 200] * 100, [Action.CREATE] * 100)
    text = render_plan_markdown(plan, budget=5_000)
    check_valid(text, 5_000)
    shown = re.findall(r"^\+ (Queue/q\d+)$", text, flags=re.MULTILINE)
    assert shown == [f"Queue/q{i:04d}" for i in range(len(shown))]
    assert 0 < len(shown) < 100
    assert f"**{100 - len(shown)} of 100 resource changes not shown**" in text
    assert "`trainform show PLANFILE`" in text


def test_the_whole_plan_fits_without_a_note_when_there_is_room() -> None:
    plan = make_plan(["x"] * 3, [Action.CREATE, Action.UPDATE, Action.DELETE])
    text = render_plan_markdown(plan)
    assert "not shown" not in text
    assert "<details>" not in text  # few changes are not folded
    body = text.split("```diff\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert "+ Queue/q0000" in body
    assert "+     spec.v: x" in body
    assert "! Queue/q0001" in body
    assert "!     spec.v: old -> x" in body
    assert "- Queue/q0002" in body


def test_a_value_with_backticks_cannot_close_the_fence() -> None:
    text = render_plan_markdown(make_plan(["a ```` b"], [Action.CREATE]))
    assert "`````diff\n" in text
    assert text.count("\n`````\n") == 1


def test_policy_section_comes_after_the_counts_and_before_the_changes() -> None:
    text = render_plan_markdown(
        make_plan(["x"], [Action.CREATE]), policies="#### Policy findings\n"
    )
    assert text.index("| create | 1 |") < text.index("#### Policy findings") < text.index("```diff")


def test_code_span_survives_backticks() -> None:
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x") == "`` `x ``"
