"""One owner per Slurm object: a shared QOS declared once, an account limit in one place
(providers/slurm/sharing.py), and the association settings compared as Slurm means them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from trainform.providers.base import DesiredResource
from trainform.providers.slurm import settings
from trainform.providers.slurm.accounting import parse_associations
from trainform.providers.slurm.sharing import cross_problems, queue_problems
from trainform.specs.models.slurm import SlurmQueue


def queue(name: str, slurm: dict[str, Any] | None = None, priority: int = 10,
          quota: dict[str, Any] | None = None) -> DesiredResource:  # fmt: skip
    spec: dict[str, Any] = {
        "pools": [{"pool": "p", "nominalQuota": quota or {}}],
        "defaultPriority": priority,
        "preemption": {"withinQueue": "Never", "reclaimWithinCohort": "Never"},
    }
    if slurm is not None:
        spec["slurm"] = slurm
    document = {"kind": "Queue", "metadata": {"name": name}, "spec": spec}
    return DesiredResource(f"Queue/{name}", "Queue", name, None, document)


def sharer(name: str, owner: str, qos: str = "train", priority: int = 10) -> DesiredResource:
    return queue(name, {"qosFrom": owner, "partition": {"QOS": qos}}, priority)


def owner(name: str = "short") -> DesiredResource:
    return queue(name, {"partition": {"QOS": "train"}})


CASES = [
    pytest.param([owner(), sharer("long", "short")], [], id="declared-once"),
    pytest.param([owner(), owner("long")], ["Queue/short"], id="declared-twice"),
    pytest.param([sharer("long", "short")], ["Queue/long"], id="owner-not-on-instance"),
    pytest.param([owner(), sharer("long", "short", "other")], ["Queue/long"], id="other-qos"),
    pytest.param([owner(), sharer("long", "short", priority=5)], ["Queue/long"],
                 id="priority-differs"),
    pytest.param([owner(), sharer("mid", "short"), sharer("long", "mid")], ["Queue/long"],
                 id="chained"),
]  # fmt: skip


@pytest.mark.parametrize(("queues", "refused"), CASES)
def test_a_qos_shared_by_partitions_has_exactly_one_declaring_queue(
    queues: list[DesiredResource], refused: list[str]
) -> None:
    problems = cross_problems(queues)

    assert sorted(p.address for p in problems) == refused
    assert all(p.field in ("spec.slurm.qosFrom", "spec.slurm.partition.QOS") for p in problems)


def test_a_queue_taking_a_qos_declares_nothing_of_it() -> None:
    shared = queue("long", {"qosFrom": "short"}, quota={"gpu": "4"})

    fields = sorted(p.field for p in queue_problems(shared))

    assert fields == ["spec.pools[0].nominalQuota", "spec.slurm.qosFrom"]
    assert settings.queue_qos(sharer("long", "short").spec, False, "marker") == {}
    with pytest.raises(ValidationError, match="declared by Queue short"):
        SlurmQueue.model_validate({"qosFrom": "short", "qos": {"MaxWall": "60"}})


def project(name: str, limits: dict[str, str]) -> DesiredResource:
    document = {
        "kind": "Project",
        "metadata": {"name": name},
        "spec": {"slurm": {"limits": limits}},
    }
    return DesiredResource(f"Project/{name}", "Project", name, None, document)


def quota(name: str, limits: dict[str, Any]) -> DesiredResource:
    document = {"kind": "Quota", "spec": {"queue": "q", "limits": limits}}
    return DesiredResource(f"Quota/acme/{name}", "Quota", name, "acme", document)


@pytest.mark.parametrize(
    ("resources", "refused"),
    [
        pytest.param([project("acme", {"GrpTRES": ""}), quota("a", {"gpu": "2"})], True,
                     id="project-and-quota"),
        pytest.param([quota("a", {"gpu": "2"}), quota("b", {"gpu": "4"})], True,
                     id="two-quotas-same-tres"),
        pytest.param([quota("a", {"gpu": "2"}), quota("b", {"cpu": "4"})], False,
                     id="two-quotas-other-tres"),
        pytest.param([project("acme", {"MaxJobs": "3"}), quota("a", {"runningJobs": 2})], False,
                     id="other-settings"),
    ],
)  # fmt: skip
def test_an_account_limit_is_declared_in_one_place(
    resources: list[DesiredResource], refused: bool
) -> None:
    problems = cross_problems(resources)

    assert bool(problems) is refused
    assert all(p.field == "spec.limits" and p.address.startswith("Quota/") for p in problems)


def test_associations_keep_own_settings_apart_from_inherited_ones() -> None:
    columns = "|".join  # Account|User|Partition|Parent|DefaultQOS|GrpJobs|...|QOS
    enforced = "\n".join([
        columns(["par", "", "", "root", "", "", "", "", "", "", "", "", "", "01:40:00", "normal"]),
        columns(["kid", "", "", "par", "", "", "", "", "", "", "", "", "", "01:40:00", "normal"]),
        columns(["kid", "bob", "gpu", "", "", "", "", "", "", "", "", "", "", "01:40:00",
                 "normal,train"]),
    ])  # fmt: skip
    own = "\n".join([
        columns(["par", "", "", "root", "", "", "", "", "", "", "", "", "", "01:40:00", ""]),
        columns(["kid", "", "", "par", "", "", "", "", "", "", "", "", "", "", ""]),
        columns(["kid", "bob", "gpu", "", "", "", "", "", "", "", "", "", "", "", "train"]),
    ])  # fmt: skip

    par, kid, bob = parse_associations(enforced, own)

    assert par.limits["MaxWall"] == "01:40:00" and kid.limits["MaxWall"] == ""
    assert kid.effective["MaxWall"] == "01:40:00"
    assert bob.limits["QOS"] == "normal,train" and bob.qos_list == ["normal", "train"]
    assert settings.same("QOS", "train,normal", bob.limits["QOS"])
    assert settings.same("DefaultQOS", "", "-1")
