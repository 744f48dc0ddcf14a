"""The names of an attempt's objects (job_names.py) are valid and bounded for any job name:
the Job (a DNS-1123 label that leaves room for `-<last index>`), its headless Service (a
DNS-1035 label), its pods' hostnames and node 0's DNS name; names a real server accepted
before stay as they were. Plan refuses spec.env that the launch contract sets."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trainform.providers.base import DesiredResource
from trainform.providers.kubernetes.job_names import (
    attempt_job_name,
    name_problems,
    pod_address,
    pod_hostname,
    service_name,
)
from trainform.providers.kubernetes.kueue_rules import resource_problems
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.provider import KubernetesProvider

DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
RUN = "r-0a1b2c3d4e5f"


def _valid(name: str, nodes: int, namespace: str = "team") -> None:
    job = attempt_job_name(name, RUN, 1, nodes)
    last = pod_hostname(job, nodes - 1)
    assert len(last) <= 63 and DNS_1123.fullmatch(last), last
    service = service_name(job)
    assert len(service) <= 63 and DNS_1035.fullmatch(service), service
    assert len(pod_address(job, namespace)) <= 253
    assert name_problems(job, nodes, namespace) == []


@pytest.mark.parametrize(
    ("name", "nodes", "job", "service"),
    [
        pytest.param("resnet", 2, "resnet-0a1b2c3d-1", "resnet-0a1b2c3d-1", id="plain"),
        pytest.param("7b-llama", 3, "7b-llama-0a1b2c3d-1", "svc-7b-llama-0a1b2c3d-1", id="digit"),
        pytest.param("a" * 50, 1, "a" * 50 + "-0a1b2c3d-1", None, id="61-single-node-kept"),
    ],
)
def test_valid_names_stay_as_they_were_and_a_service_starts_with_a_letter(
    name: str, nodes: int, job: str, service: str | None
) -> None:
    made = attempt_job_name(name, RUN, 1, nodes)

    assert made == job
    if service is not None:
        assert service_name(made) == service
        assert pod_address(made, "ml-team") == f"{job}-0.{service}.ml-team.svc"
    _valid(name, nodes)


def test_a_long_name_starting_with_a_digit_is_cut_with_a_stable_hash() -> None:
    name = "7b-" + "x" * 60
    job = attempt_job_name(name, RUN, 1, 12)

    assert len(job) == 63 - len("-11") and job.startswith("7b-xxx")
    assert job == attempt_job_name(name, RUN, 1, 12)  # stable
    assert job != attempt_job_name(name + "y", RUN, 1, 12)  # the hash is of the full name
    assert job != attempt_job_name(name, RUN, 2, 12)
    assert service_name(job).startswith("svc-7b-") and len(service_name(job)) <= 63
    _valid(name, 12)


@settings(max_examples=300, deadline=None)
@given(
    st.text(min_size=1, max_size=300),
    st.integers(min_value=1, max_value=100_000),
    st.integers(min_value=1, max_value=10**6),
    st.one_of(st.none(), st.text(max_size=80)),
)
def test_any_name_on_any_number_of_nodes_gives_names_the_server_accepts(
    name: str, nodes: int, attempt: int, suite: str | None
) -> None:
    job = attempt_job_name(name, RUN, attempt, nodes, suite)
    assert len(job) <= 63 - len(f"-{nodes - 1}") and DNS_1123.fullmatch(job)
    assert name_problems(job, nodes, "n" * 63) == []


def _job(env: dict[str, str], command: list[str], nodes: int = 2) -> DesiredResource:
    resources = {"nodes": nodes, "acceleratorsPerNode": 4, "cpu": "8", "memory": "32Gi"}
    spec = {"queue": "train", "command": command, "env": env, "resources": resources}
    document = {"kind": "TrainingJob", "metadata": {"name": "7b-" + "x" * 60}, "spec": spec}
    return DesiredResource("TrainingJob/vision/j", "TrainingJob", "j", "vision", document)


@pytest.mark.parametrize(
    ("command", "env", "refused"),
    [
        pytest.param(["torchrun", "t.py"], {"PET_NNODES": "4", "X": "1"}, ["PET_NNODES"], id="pet"),
        pytest.param(["python", "t.py"], {"RANK": "0", "NODE_RANK": "0"}, ["NODE_RANK", "RANK"]),
        pytest.param(["torchrun", "t.py"], {"RANK": "0"}, [], id="torchrun-sets-rank-itself"),
    ],
)
def test_spec_env_may_not_set_what_the_launch_contract_sets(
    command: list[str], env: dict[str, str], refused: list[str]
) -> None:
    problems = resource_problems(_job(env, command), Naming("trainform", "ml-"))

    assert [p.field for p in problems] == [f"spec.env.{name}" for name in refused]
    assert all("launch contract" in p.message for p in problems)
    assert resource_problems(_job({}, command), Naming()) == []


def test_the_plan_shows_the_declared_processes_per_node() -> None:
    resource = _job({}, ["python", "t.py"])
    resource.spec["resources"]["procsPerNode"] = 2
    resource.spec["image"] = "trainer"
    [job] = KubernetesProvider().render(resource)

    [container] = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == ("4", "2")
    assert container["command"][3:] == ["trainform-launch", "python", "t.py"]
