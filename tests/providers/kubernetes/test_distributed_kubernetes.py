"""Acceptance: distributed training on Kubernetes, from `trainform apply` through the test API
server with its Kueue stand-in and Job controller (which gives Indexed pods their real
identity: hostname, subdomain, completion-index annotation).

- every pod of a 3-node torchrun job, its command and environment as the pod holds them
  (the fieldRef resolved from the pod's own annotation), read by torchrun's own parser
  (torch.distributed.run `parse_args` + `config_from_args`, torch 2.13): 3 nodes, node rank
  = the pod's index, processes per node as declared, one static rendezvous endpoint that
  is pod 0's DNS name under the job's headless Service;
- a job named `7b-` + 60 characters plans and applies: Job, Service and pod hostnames
  are valid names (the server refuses anything else), and its pods meet on pod 0; the
  plan after the apply is empty;
- a 2 x 4-GPU job on 8-GPU topology nodes carries no required pod anti-affinity (Kueue's
  TAS may pack both pods onto one node), a 2 x 8-GPU job (whole nodes) does.
Real torch, no mocks; without torch the test is skipped, in CI (CI=true) it fails.
"""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from trainform.providers.kubernetes.kinds import JOB, SERVICE
from trainform.providers.kubernetes.naming import short_hash
from trainform.providers.kubernetes.provider import KubernetesProvider
from trainform.providers.kubernetes.timeline import POD

from tests.engine.support import SpecFolder, run_trainform
from tests.providers.kubernetes.fixtures import INSTANCE, kubernetes_config, unique_prefix
from tests.providers.oci.fixtures import registry_server
from tests.services.common import unavailable
from tests.services.kube_api import KubeAPI
from tests.services.kube_api.job_controller import INDEX_ANNOTATION
from tests.services.registry import RegistryServer, push_image

__all__ = ["registry_server"]

LONG = "7b-" + "x" * 60
PLATFORM = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: h100}}
spec:
  provider: k8s
  nodes: 4
  accelerator: {{type: nvidia-h100-80gb, count: 8}}
  cpu: 200
  memory: 1800Gi
  nodeSelector: {{cloud.google.com/gke-nodepool: h100}}
  topology: [cloud.google.com/gce-topology-block, kubernetes.io/hostname]
---
apiVersion: trainform/v1
kind: Queue
metadata: {{name: train}}
spec:
  pools: [{{pool: h100, nominalQuota: {{gpu: 32, cpu: 800, memory: 7200Gi}}}}]
  defaultPriority: 100
---
apiVersion: trainform/v1
kind: Project
metadata: {{name: vision}}
spec: {{owners: [vision-leads@example.com]}}
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: train, project: vision}}
spec: {{queue: train, limits: {{gpu: 32, cpu: 800, memory: 7200Gi}}}}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "{reference}"}}
"""
JOB_SPEC = """---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: {name}, project: vision}}
spec:
  queue: train
  image: trainer
  command: {command}
  resources: {{nodes: {nodes}, acceleratorsPerNode: {per_node}, {procs}cpu: 8, memory: 32Gi}}
  maxRuntime: 2h
"""
JOBS = {  # name: (command, nodes, accelerators per node, processes per node)
    "llama": ("[torchrun, train.py, --steps, '3']", 3, 2, 2),
    LONG: ("[python, train.py]", 2, 1, 1),
    "pair": ("[python, train.py]", 2, 4, 1),
    "whole": ("[python, train.py]", 2, 8, 1),
}


@pytest.fixture
def torch_run() -> ModuleType:
    try:
        return importlib.import_module("torch.distributed.run")
    except ImportError as error:
        unavailable(f"torch is not installed ({error}): pip install 'trainform[torch]'")


@pytest.fixture(scope="module")
def applied(
    tmp_path_factory: pytest.TempPathFactory, kueue_api: KubeAPI, registry_server: RegistryServer
) -> Iterator[tuple[KubernetesProvider, str, list[str]]]:
    """The jobs applied once for the module, with the Kueue stand-in running meanwhile;
    the pods it made stay in the server for the tests to read."""
    prefix = unique_prefix()
    repository = f"ml/{uuid.uuid4().hex[:8]}"
    pushed = push_image(registry_server.url, repository, "v1")
    host = registry_server.host
    registry = (
        "  - name: registry\n    type: registry\n"
        f"    connection: {{url: 'http://{host}', insecure: true, allowed: ['{host}']}}\n"
    )
    root = tmp_path_factory.mktemp("distributed") / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        kubernetes_config(kueue_api, prefix).replace("state:", registry + "state:", 1)
    )
    text = PLATFORM.format(reference=f"{host}/{repository}:v1@{pushed.digest}")
    for name, (command, nodes, per_node, procs) in JOBS.items():
        declared = f"procsPerNode: {procs}, " if procs != per_node else ""
        text += JOB_SPEC.format(
            name=name, command=command, nodes=nodes, per_node=per_node, procs=declared
        )
    (root / "platform.yaml").write_text(text)
    stand_in = kueue_api.kueue
    stand_in.errors.clear()
    stand_in.jobs.refused.clear()
    stand_in.start()
    try:
        result = run_trainform("apply", ".", "--auto-approve", cwd=root, timeout=300)
    finally:
        stand_in.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    assert stand_in.errors == [], "the server refused the Kueue stand-in's writes"
    again = run_trainform("plan", ".", "--detailed-exitcode", cwd=root, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr  # applied: nothing left to do
    # gang admission rests on Kueue's waitForPodsReady, and this cluster has no Kueue
    # configuration to read: a warning of the plan, not drift (the exit code stays 0)
    assert "only with Kueue's waitForPodsReady; cannot read Kueue's configuration" in again.stdout
    assert "kueue-system/kueue-manager-config: no such ConfigMap" in again.stdout
    spec_folder = SpecFolder(root)
    provider = spec_folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    yield provider, f"{prefix}vision", list(stand_in.jobs.refused)
    spec_folder.close()


def _job(provider: KubernetesProvider, namespace: str, name: str) -> dict[str, Any]:
    selector = f"trainform.dev/address-hash={short_hash(f'TrainingJob/vision/{name}')}"
    [job] = provider.client.list(JOB, selector, namespace)
    return job


def _pods(provider: KubernetesProvider, namespace: str, job: str) -> dict[int, dict[str, Any]]:
    listed = provider.client.list(POD, f"batch.kubernetes.io/job-name={job}", namespace)
    return {int(pod["metadata"]["annotations"][INDEX_ANNOTATION]): pod for pod in listed}


def _environment(pod: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet resolves it from this pod."""
    resolved = {}
    for item in pod["spec"]["containers"][0]["env"]:
        if "valueFrom" in item:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            key = path.removeprefix("metadata.annotations['").removesuffix("']")
            resolved[item["name"]] = pod["metadata"]["annotations"][key]
        else:
            resolved[item["name"]] = item["value"]
    return resolved


def _torchrun_config(torch_run: ModuleType, environment: dict[str, str], argv: list[str]) -> Any:
    saved = dict(os.environ)
    try:
        os.environ.update(environment)
        args = torch_run.parse_args(argv)
        config, _, _ = torch_run.config_from_args(args)
        return args, config
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _node_zero(provider: KubernetesProvider, namespace: str, pods: dict[int, Any]) -> str:
    """Pod 0's DNS name under the job's headless Service, checking the Service is that."""
    pod = pods[0]
    service = provider.client.get(SERVICE, pod["spec"]["subdomain"], namespace)
    assert service is not None and service["spec"]["clusterIP"] == "None"
    selector = service["spec"]["selector"]
    assert all(pod["metadata"]["labels"].get(k) == v for k, v in selector.items())
    return f"{pod['spec']['hostname']}.{pod['spec']['subdomain']}.{namespace}.svc"


def test_every_pod_of_a_torchrun_job_starts_one_group_as_torchrun_reads_it(
    applied: tuple[KubernetesProvider, str, list[str]], torch_run: ModuleType
) -> None:
    provider, namespace, refused = applied
    job = _job(provider, namespace, "llama")
    pods = _pods(provider, namespace, job["metadata"]["name"])
    assert sorted(pods) == [0, 1, 2]
    master = _node_zero(provider, namespace, pods)

    endpoints = set()
    for index, pod in pods.items():
        command = pod["spec"]["containers"][0]["command"]
        assert command[0] == "torchrun"
        args, config = _torchrun_config(torch_run, _environment(pod), command[1:])
        assert (config.min_nodes, config.max_nodes) == (3, 3)
        assert config.rdzv_backend == "static" and config.rdzv_configs["rank"] == index
        assert config.nproc_per_node == 2
        assert (args.training_script, args.training_script_args) == ("train.py", ["--steps", "3"])
        endpoints.add(config.rdzv_endpoint)
    assert endpoints == {f"{master}:29500"}
    [run] = provider.runs("TrainingJob/vision/llama")
    assert (run.attempts[-1].nodes, run.attempts[-1].procs_per_node) == (3, 2)
    assert refused == []  # no pod of any job was refused after admission


def test_a_job_named_from_a_digit_and_63_characters_gets_names_the_server_accepts(
    applied: tuple[KubernetesProvider, str, list[str]],
) -> None:
    provider, namespace, refused = applied
    job = _job(provider, namespace, LONG)
    name = job["metadata"]["name"]
    assert len(name) <= 61 and name.startswith("7b-xxx")
    pods = _pods(provider, namespace, name)
    assert sorted(pods) == [0, 1] and refused == []
    master = _node_zero(provider, namespace, pods)
    assert pods[0]["spec"]["subdomain"].startswith("svc-7b-")
    for index, pod in pods.items():
        assert len(pod["spec"]["hostname"]) <= 63 and len(pod["metadata"]["name"]) <= 63
        environment = _environment(pod)
        assert environment["MASTER_ADDR"] == master
        assert (environment["RANK"], environment["WORLD_SIZE"]) == (str(index), "2")
        assert (environment["LOCAL_RANK"], environment["LOCAL_WORLD_SIZE"]) == ("0", "1")


@pytest.mark.parametrize(("name", "spread"), [("pair", False), ("whole", True)])
def test_only_pods_asking_for_whole_nodes_require_a_node_each(
    applied: tuple[KubernetesProvider, str, list[str]], name: str, spread: bool
) -> None:
    provider, namespace, _ = applied
    job = _job(provider, namespace, name)
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"]
    for pod in [template, *_pods(provider, namespace, job["metadata"]["name"]).values()]:
        affinity = pod["spec"].get("affinity") or {}
        assert ("podAntiAffinity" in affinity) is spread
