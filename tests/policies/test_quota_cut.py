"""quota-cut compares the plan's current (state) values with the specs."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.planner.plan_model import Action, Plan, ResourceChange
from trainform.policies.engine import evaluate_policies
from trainform.policies.trusted import load_trusted
from trainform.specs import load_specs

from tests.policies.support import CONFIG, POOL, PROJECT, TODAY, evaluate, folder, of, queue

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


QUOTA_GPU = """\
apiVersion: trainform/v1
kind: Quota
metadata: {{name: {name}, project: team-a{annotations}}}
spec: {{queue: team-a, limits: {{gpu: 16}}}}
"""


def quota_text(name: str = "team-a", annotations: str = "") -> str:
    return QUOTA_GPU.format(name=name, annotations=annotations)


def review_of(tmp_path: Path, base: dict[str, str], head: dict[str, str], provider: str) -> list:
    """quota-cut's findings in review: the base folder as the side before, on `provider`."""
    config = CONFIG.replace("type: kubernetes", f"type: {provider}")
    common = {"trainform.yaml": config, "pool.yaml": POOL, "project.yaml": PROJECT}
    roots = []
    for side, files in (("base", base), ("head", head)):
        roots.append(folder(tmp_path / side, {**common, **files}))
        (roots[-1] / "trainform.yaml").write_text(config, encoding="utf-8")
    before, specs = load_specs(roots[0]), load_specs(roots[1])
    trusted = load_trusted(None, specs.config, specs.root)
    report = evaluate_policies(specs, None, trusted, today=TODAY, before=before)
    return of(report, "quota-cut")


@pytest.mark.parametrize(
    ("provider", "why"),
    [
        pytest.param("kubernetes", "no LocalQueue for queue team-a", id="kubernetes"),
        pytest.param("slurm", "no association on partition team-a", id="slurm"),
    ],
)
def test_a_deleted_quota_is_a_cut_to_zero_where_no_quota_runs_nothing(
    tmp_path: Path, provider: str, why: str
) -> None:
    base = {"q.yaml": queue("team-a", 16), "quota.yaml": quota_text()}
    (cut,) = review_of(tmp_path, base, {"q.yaml": queue("team-a", 16)}, provider)
    assert cut.address == "Quota/team-a/team-a" and cut.severity == "deny"
    assert cut.message.startswith("the Quota is deleted, so gpu drops from 16 to 0 (100%)")
    assert why in cut.message and "before deleting it, or waive quota-cut" in cut.message


def test_a_deleted_quota_on_a_local_queue_lifts_its_limits_and_is_no_cut(tmp_path: Path) -> None:
    base = {"q.yaml": queue("team-a", 16), "quota.yaml": quota_text()}
    assert review_of(tmp_path, base, {"q.yaml": queue("team-a", 16)}, "local") == []


def test_a_quota_annotated_before_its_delete_or_renamed_is_no_cut(tmp_path: Path) -> None:
    allowed = f', annotations: {{{ALLOW}: "team leaves"}}'
    base = {"q.yaml": queue("team-a", 16), "quota.yaml": quota_text(annotations=allowed)}
    assert review_of(tmp_path / "a", base, {"q.yaml": queue("team-a", 16)}, "kubernetes") == []
    renamed = {"q.yaml": queue("team-a", 16), "quota.yaml": quota_text("team-a-gpus")}
    base = {"q.yaml": queue("team-a", 16), "quota.yaml": quota_text()}
    assert review_of(tmp_path / "b", base, renamed, "kubernetes") == []


def test_a_deleted_queue_is_a_cut_of_its_nominal_quota(tmp_path: Path) -> None:
    base = {"q.yaml": queue("team-a", 16) + "---\n" + queue("team-b", 8)}
    (cut,) = review_of(tmp_path, base, {"q.yaml": queue("team-b", 8)}, "kubernetes")
    assert cut.address == "Queue/team-a"
    assert cut.message.startswith("the Queue is deleted, so gpu on pool h100 drops from 16 to 0")


def test_plan_counts_a_deleted_quota_as_review_does_but_not_in_a_destroy_plan(
    tmp_path: Path,
) -> None:
    root = folder(tmp_path / "a", {"pool.yaml": POOL, "q.yaml": queue("team-a", 8)})
    document = {
        "metadata": {"labels": {}, "annotations": {}},
        "spec": {"queue": "team-a", "limits": {"gpu": "16"}},
    }
    change = ResourceChange("Quota/team-a/team-a", "Quota", Action.DELETE, ["k8s"], before=document)
    plan = Plan("0", "lineage", 1, "", "", {}, False, changes=[change])
    (cut,) = of(evaluate(root, plan=plan), "quota-cut")
    assert "no LocalQueue for queue team-a" in cut.message
    plan.destroy = True
    assert of(evaluate(root, plan=plan), "quota-cut") == []
