"""Capacity figures: pools, cohorts, queues and projects, as docs/review.md defines them."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from trainform.policies.review.capacity import compute_capacity
from trainform.specs import load_specs

from tests.helpers import write_tree
from tests.policies.review.fixture import BASE, queues, quota


def capacity_of(root: Path, files: dict[str, str]):  # noqa: ANN201
    write_tree(root, files)
    return compute_capacity(load_specs(root))


def test_base_platform_figures(tmp_path: Path) -> None:
    capacity = capacity_of(tmp_path, BASE)
    pool = capacity.pools["gpu"]
    assert (pool.capacity, pool.nominal, pool.unallocated) == (64, 64, 0)
    # Each queue lends at most 16 of its 32, and may borrow at most 16.
    assert (pool.lendable, pool.borrowable) == (32, 32)
    cohort = capacity.cohorts["research/gpu"]
    assert (cohort.queues, cohort.nominal, cohort.lendable, cohort.borrowable) == (2, 64, 32, 32)
    assert capacity.queues["team-a"].reach == 48
    team_a = capacity.projects["team-a"]
    assert (team_a.guaranteed, team_a.reachable, team_a.queues) == (32, 48, ("team-a",))


def test_moving_eight_gpus_moves_guarantees(tmp_path: Path) -> None:
    capacity = capacity_of(tmp_path, {**BASE, "platform/queues.yaml": queues(24, 40)})
    assert capacity.projects["team-a"].guaranteed == 24
    assert capacity.projects["team-b"].guaranteed == 40
    # team-a borrows at most 16 (its limit); team-b only what team-a lends (16).
    assert capacity.projects["team-a"].reachable == 40
    assert capacity.projects["team-b"].reachable == 56


def test_quota_caps_what_a_project_gets(tmp_path: Path) -> None:
    files = {**BASE, "teams/team-a/quota.yaml": quota("team-a", 20)}
    team_a = capacity_of(tmp_path, files).projects["team-a"]
    assert (team_a.guaranteed, team_a.reachable) == (20, 20)


def test_overcommitted_pool_has_negative_unallocated_and_reach_stays_within_capacity(
    tmp_path: Path,
) -> None:
    capacity = capacity_of(tmp_path, {**BASE, "platform/queues.yaml": queues(72, 32)})
    assert capacity.pools["gpu"].unallocated == Decimal(-40)
    assert capacity.queues["team-a"].reach == 64


def test_fair_share_follows_weights_within_the_cohort(tmp_path: Path) -> None:
    weighted = queues(32, 32).replace("  defaultPriority: 100\n", "  fairShareWeight: 3\n", 1)
    capacity = capacity_of(tmp_path, {**BASE, "platform/queues.yaml": weighted})
    assert capacity.queues["team-a"].fair_share == 48
    assert capacity.queues["team-b"].fair_share == 16
