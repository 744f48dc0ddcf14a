"""End to end through the `trainform` CLI: examples/platform on Kubernetes (the fake API
server, or a real cluster with the `kubernetes_cluster` marker), a second plan with no
changes, drift after a kubectl-style edit, and a Kueue rule failing the plan at file:line.

The copy of examples/platform keeps only what the kubernetes instance `gke-prod` holds:
its pools, queues, projects and quotas. The Slurm pool and queues (and the quotas on
them), datasets, images, evaluation suites and training jobs are left out: they need the
slurm, objectstore and registry instances, which this test does not run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE, COHORT, NODE

from tests.engine.support import REPO, run_trainform
from tests.services.kube_api import KubeAPI

EXAMPLE = REPO / "examples" / "platform"
KEPT = ("Project", "ResourcePool", "Queue", "Quota")


def _kubernetes_only(target: Path, kubeconfig: str, context: str, prefix: str) -> Path:
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".trainform", "*.lock"))
    for path in target.rglob("*.yaml"):
        if path.name == "trainform.yaml":
            continue
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
        kept = [
            d
            for d in documents
            if d["kind"] in KEPT
            and d["spec"].get("provider", "gke-prod") == "gke-prod"
            and not d["metadata"]["name"].startswith("hpc-")
            and not str(d["spec"].get("queue", "")).startswith("hpc-")
        ]
        path.write_text(yaml.safe_dump_all(kept, sort_keys=False) if kept else "")
    connection = {"kubeconfig": kubeconfig, "namespacePrefix": prefix, "namePrefix": prefix}
    if context:
        connection["context"] = context
    config = {
        "apiVersion": "trainform/v1",
        "providers": [{"name": "gke-prod", "type": "kubernetes", "connection": connection}],
        "state": {"backend": "local", "path": ".trainform/state.json"},
        "environments": {"staging": {"variables": {}}},
        "defaultEnvironment": "staging",
        # The tenancy of .policies/policies.yaml (the loop above emptied that file).
        "policies": {
            "settings": {
                "project-isolation": {"adminPaths": ["platform/**", "teams/*/quotas.yaml"]}
            }
        },
    }
    (target / "trainform.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return target


def tf(folder: Path, *args: str) -> tuple[int, str]:
    result = run_trainform(*args, cwd=folder, timeout=120)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


def kubectl_edit(
    client: KubeClient, kubectl_args: list[str], name: str, patch: dict[str, Any]
) -> None:
    """What `kubectl edit cohort` sends: a merge patch by the field manager
    kubectl-edit; through kubectl itself when it is installed, else through the API."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        client.merge_patch(COHORT, name, None, patch, "kubectl-edit")
        return
    subprocess.run(
        [kubectl, *kubectl_args, "patch", "cohort", name, "--type", "merge"]
        + ["--field-manager", "kubectl-edit", "-p", json.dumps(patch)],
        check=True,
        capture_output=True,
        timeout=60,
    )


def apply_plan_and_drift(
    folder: Path, client: KubeClient, prefix: str, kubectl_args: list[str]
) -> None:
    code, output = tf(folder, "apply", ".", "--auto-approve")
    assert code == 0, output
    code, output = tf(folder, "plan", ".", "--detailed-exitcode")
    assert code == 0, output

    queue = client.get(COHORT, f"{prefix}pretrain")
    assert queue is not None
    groups = queue["spec"]["resourceGroups"]
    groups[0]["flavors"][0]["resources"][2]["nominalQuota"] = "64"
    kubectl_edit(client, kubectl_args, f"{prefix}pretrain", {"spec": {"resourceGroups": groups}})
    code, output = tf(folder, "drift", ".", "--format", "json")
    assert code == 2, output
    [finding] = [f for f in json.loads(output)["findings"] if f["address"] == "Queue/pretrain"]
    assert [(c["path"], c["before"], c["after"]) for c in finding["changes"]] == [
        ("spec.pools[0].nominalQuota.gpu", "96", "64")
    ]
    code, output = tf(folder, "apply", ".", "--auto-approve")
    assert code == 1 and "kubectl-edit" in output, output

    config = yaml.safe_load((folder / "trainform.yaml").read_text())
    config["providers"][0]["connection"]["forceConflicts"] = True
    (folder / "trainform.yaml").write_text(yaml.safe_dump(config))
    code, output = tf(folder, "apply", ".", "--auto-approve")
    assert code == 0, output
    code, output = tf(folder, "drift", ".")
    assert code == 0, output


def test_examples_platform_applies_plans_empty_and_restores_a_kubectl_edit(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    prefix = f"e{uuid.uuid4().hex[:6]}-"
    folder = _kubernetes_only(tmp_path / "platform", str(kube_api.kubeconfig), "", prefix)
    client = KubeClient(make_api_client(str(kube_api.kubeconfig), ""))

    apply_plan_and_drift(folder, client, prefix, ["--kubeconfig", str(kube_api.kubeconfig)])


def test_a_lending_limit_above_nominal_quota_fails_the_plan_at_its_line(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    folder = _kubernetes_only(tmp_path / "platform", str(kube_api.kubeconfig), "", "l-")
    queues = folder / "platform" / "queues.yaml"
    text = queues.read_text()
    assert "lendingLimit:\n      gpu: 48" in text
    queues.write_text(text.replace("lendingLimit:\n      gpu: 48", "lendingLimit:\n      gpu: 480"))
    line = next(
        number
        for number, content in enumerate(queues.read_text().splitlines(), start=1)
        if "gpu: 480" in content
    )

    code, output = tf(folder, "plan", ".")

    assert code == 1, output
    assert f"platform/queues.yaml:{line}:" in output, output
    assert "spec.pools[0].lendingLimit.gpu: lendingLimit 480 is above nominalQuota 96" in output


@pytest.mark.kubernetes_cluster
def test_examples_platform_on_a_real_cluster(tmp_path: Path) -> None:
    """The same end-to-end run against a real cluster with Kueue installed. Opt-in: runs
    only when TRAINFORM_TEST_KUBECONFIG names a kubeconfig (TRAINFORM_TEST_KUBE_CONTEXT
    optionally its context); skipped otherwise, in CI too: the one allowed skip, since no
    cluster exists there. Everything it creates is prefixed and deleted at the end."""
    kubeconfig = os.environ.get("TRAINFORM_TEST_KUBECONFIG", "")
    if not kubeconfig:
        pytest.skip("TRAINFORM_TEST_KUBECONFIG is not set: no real cluster to test against")
    context = os.environ.get("TRAINFORM_TEST_KUBE_CONTEXT", "")
    prefix = f"tf{uuid.uuid4().hex[:6]}-"
    folder = _kubernetes_only(tmp_path / "platform", kubeconfig, context, prefix)
    for path in folder.rglob("*.yaml"):  # a real cluster refuses deleting protected pools
        path.write_text(path.read_text().replace("preventDestroy: true", "preventDestroy: false"))
    client = KubeClient(make_api_client(kubeconfig, context))
    try:
        arguments = ["--kubeconfig", kubeconfig] + (["--context", context] if context else [])
        apply_plan_and_drift(folder, client, prefix, arguments)
    finally:
        tf(folder, "plan", ".", "--destroy", "--allow-mass-delete", "-out", "destroy.plan")
        tf(folder, "apply", "destroy.plan")


def _hand_made(client: KubeClient, prefix: str) -> None:
    """Kueue objects another tool made in trainform's layout: a flavor with one matching
    node, a queue's Cohort, and a namespace with a LocalQueue and its ClusterQueue."""
    kueue = "kueue.x-k8s.io/v1beta2"
    node_labels = {"pool": f"{prefix}a100"}
    namespace = f"{prefix}vision"
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": kueue,
            "kind": "ResourceFlavor",
            "metadata": {"name": f"{prefix}a100"},
            "spec": {"nodeLabels": node_labels},
        },
        {
            "apiVersion": kueue,
            "kind": "Cohort",
            "metadata": {"name": f"{prefix}train"},
            "spec": {
                "parentName": "research",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": f"{prefix}a100",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 64},
                                    {"name": "memory", "nominalQuota": "512Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": 8},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": kueue,
            "kind": "ClusterQueue",
            "metadata": {"name": f"{prefix}train-vision"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "cohortName": f"{prefix}train",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu", "pods"],
                        "flavors": [
                            {
                                "name": f"{prefix}a100",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 0},
                                    {"name": "memory", "nominalQuota": 0},
                                    {
                                        "name": "nvidia.com/gpu",
                                        "nominalQuota": 0,
                                        "borrowingLimit": 8,
                                    },
                                    {
                                        "name": "pods",
                                        "nominalQuota": 5,
                                        "borrowingLimit": 0,
                                        "lendingLimit": 0,
                                    },
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": kueue,
            "kind": "LocalQueue",
            "metadata": {"name": "train", "namespace": namespace},
            "spec": {"clusterQueue": f"{prefix}train-vision"},
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"{prefix}n1", "labels": node_labels},
        },
    ]
    for obj in objects:
        client.apply(obj, "kubectl", False)
    client.merge_patch(
        NODE,
        f"{prefix}n1",
        None,
        {"status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"}}},
        "kubelet",
        "status",
    )


def test_import_from_the_cluster_then_plan_shows_no_changes(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    prefix = f"i{uuid.uuid4().hex[:6]}-"
    client = KubeClient(make_api_client(str(kube_api.kubeconfig), ""))
    _hand_made(client, prefix)
    folder = tmp_path / "imported"
    folder.mkdir()
    connection = {"kubeconfig": str(kube_api.kubeconfig), "namespacePrefix": prefix}
    connection["namePrefix"] = prefix
    (folder / "trainform.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "trainform/v1",
                "providers": [{"name": "k8s", "type": "kubernetes", "connection": connection}],
                "state": {"backend": "local", "path": ".trainform/state.json"},
            }
        )
    )

    code, output = tf(folder, "import", "--from", "k8s", ".")

    assert code == 0, output
    written = list(yaml.safe_load_all((folder / "imported" / "k8s.yaml").read_text()))
    pools = [d for d in written if d and d["kind"] == "ResourcePool"]
    assert [(p["spec"]["nodes"], p["spec"]["accelerator"]["count"]) for p in pools] == [(1, 8)]
    code, output = tf(folder, "plan", ".", "--detailed-exitcode")
    assert code == 0, output
    queue = client.get(COHORT, f"{prefix}train")
    assert queue is not None  # import writes nothing: no trainform marks yet
    assert "trainform.dev/address" not in (queue["metadata"].get("annotations") or {})
    project_queue = client.get(CLUSTER_QUEUE, f"{prefix}train-vision")
    assert project_queue is not None
    assert "trainform.dev/address" not in (project_queue["metadata"].get("annotations") or {})
    [quota] = [d for d in written if d and d["kind"] == "Quota"]
    assert quota["spec"]["limits"] == {"gpu": "8", "runningJobs": 5}
