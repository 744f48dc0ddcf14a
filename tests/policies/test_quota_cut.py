"""quota-cut compares the plan's current (state) values with the specs."""

from __future__ import annotations

from pathlib import Path

from trainform.planner.plan_model import Action, Plan, ResourceChange

from tests.policies.support import POOL, evaluate, folder, of, queue

ALLOW = "trainform.dev/allow-quota-cut"


def queue_spec(gpu: int) -> dict:
    return {
        "metadata": {"labels": {}, "annotations": {}},
        "spec": {"pools": [{"pool": "h100", "nominalQuota": {"gpu": str(gpu)}}]},
    }


def plan_from(gpu_before: int, applied: int | None = None) -> Plan:
    change = ResourceChange(
        "Queue/team-a",
        "Queue",
        Action.UPDATE,
        ["k8s"],
        before=queue_spec(gpu_before),
        applied=None if applied is None else queue_spec(applied),
    )
    return Plan("0", "lineage", 1, "", "", {}, False, changes=[change])


def test_a_large_cut_needs_the_annotation(tmp_path: Path) -> None:
    root = folder(tmp_path / "a", {"pool.yaml": POOL, "q.yaml": queue("team-a", 8)})
    (cut,) = of(evaluate(root, plan=plan_from(16)), "quota-cut")
    assert (cut.address, cut.field) == ("Queue/team-a", "spec.pools[0].nominalQuota.gpu")
    assert "drops from 16 to 8 (50%)" in cut.message
    assert cut.location.startswith("q.yaml:7:")


def test_a_small_cut_or_no_plan_passes(tmp_path: Path) -> None:
    root = folder(tmp_path / "a", {"pool.yaml": POOL, "q.yaml": queue("team-a", 8)})
    assert of(evaluate(root, plan=plan_from(10)), "quota-cut") == []
    assert of(evaluate(root), "quota-cut") == []


def test_the_annotation_allows_the_cut(tmp_path: Path) -> None:
    text = queue("team-a", 8).replace(
        "metadata: {name: team-a}",
        f'metadata: {{name: team-a, annotations: {{{ALLOW}: "team shrinks"}}}}',
    )
    root = folder(tmp_path / "a", {"pool.yaml": POOL, "q.yaml": text})
    assert of(evaluate(root, plan=plan_from(16)), "quota-cut") == []


def test_putting_back_a_quota_raised_by_hand_is_no_cut(tmp_path: Path) -> None:
    root = folder(tmp_path / "a", {"pool.yaml": POOL, "q.yaml": queue("team-a", 8)})
    assert of(evaluate(root, plan=plan_from(32, applied=8)), "quota-cut") == []
    (cut,) = of(evaluate(root, plan=plan_from(32, applied=16)), "quota-cut")
    assert "drops from 16 to 8 (50%)" in cut.message
