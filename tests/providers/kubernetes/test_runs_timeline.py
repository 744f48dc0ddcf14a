"""A run's timeline on Kubernetes, end to end against the fake API server and S3: the job
waits on its quota, Kueue admits it, its pods run on two nodes and write checkpoints, a
pod is OOM-killed, attempt 2 is submitted after the backoff resuming from the latest valid
checkpoint, and succeeds. The test plays Kueue, the Job controller and the kubelet by
writing status, with the clock's own times (Kubernetes keeps seconds), and asserts the
timeline field by field, the logs (from the pods, then from the S3 archive once the pods
are gone) and the accounting."""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as kube
from trainform.planner.timeline import attempt_timelines, delivery, parse_time, seconds_between
from trainform.providers.base import ProviderContext
from trainform.providers.errors import PermanentProviderError
from trainform.providers.jobs import Cause, RunPhase, WaitSpan, retry_delay
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.jobs import job_name
from trainform.providers.kubernetes.kinds import JOB, WORKLOAD
from trainform.providers.kubernetes.naming import short_hash
from trainform.providers.kubernetes.provider import KubernetesProvider
from trainform.providers.kubernetes.timeline import POD, attempt_status
from trainform.providers.objectstore.checkpoints import S3Checkpoints

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import platform_folder, unique_prefix
from tests.providers.kubernetes.test_jobs import ADDRESS, launch
from tests.services.kube_api import KubeAPI
from tests.services.s3 import REGION, S3Server

RUN = "r-0123456789ab"
INSUFFICIENT = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu"
BACKOFF = 2


def stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def next_second() -> str:
    """Wait for the next whole second and answer it: Kubernetes times are seconds, so
    events a test orders must not share one."""
    now = time.time()
    time.sleep(int(now) + 1 - now + 0.01)
    return stamp()


def shifted(text: str, seconds: float) -> str:
    value = datetime.datetime.fromisoformat(text)
    return (value + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: str, reason: str, message: str, at: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


class Cluster:
    """Kueue, the Job controller and the kubelet, as far as the provider can tell."""

    def __init__(self, provider: KubernetesProvider, api: KubeAPI, prefix: str) -> None:
        self.provider, self.api, self.prefix = provider, api, prefix
        self.namespace = f"{prefix}vision"
        self.core = kube.CoreV1Api(kube.ApiClient(api.configuration()))

    def workload(self, job: str, conditions: list[dict[str, str]], admitted: bool) -> None:
        client = self.provider.client
        owner = client.get(JOB, job, self.namespace)
        assert owner is not None
        name = f"job-{job}"[:63]
        client.apply(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": job,
                            "uid": owner["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "queueName": "train",
                    "podSets": [
                        {"name": "main", "count": 2, "template": {"spec": {"containers": []}}}
                    ],
                },
            },
            "kueue",
            True,
        )
        status: dict[str, Any] = {"conditions": conditions}
        if admitted:
            status["admission"] = {
                "clusterQueue": f"{self.prefix}train",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 2,
                        "flavors": {"nvidia.com/gpu": f"{self.prefix}h100"},
                    }
                ],
            }
        client.merge_patch(WORKLOAD, name, self.namespace, {"status": status}, "kueue", "status")

    def admit(self, job: str, at: str) -> None:
        reserved = f"Quota reserved in ClusterQueue {self.prefix}train"
        self.workload(
            job,
            [
                condition("QuotaReserved", "True", "QuotaReserved", reserved, at),
                condition("Admitted", "True", "Admitted", "The workload is admitted", at),
            ],
            admitted=True,
        )
        self.provider.client.merge_patch(
            JOB, job, self.namespace, {"spec": {"suspend": False}}, "kueue"
        )

    def job_status(self, job: str, status: dict[str, Any]) -> None:
        self.provider.client.merge_patch(
            JOB, job, self.namespace, {"status": status}, "kube-controller-manager", "status"
        )

    def start_pods(self, job: str, nodes: list[str], at: str) -> list[str]:
        """The Job controller's pods (one per completion index), bound and running."""
        template = self.provider.client.get(JOB, job, self.namespace)
        assert template is not None
        names = []
        for index, node in enumerate(nodes):
            name = f"{job}-{index}-x{index}"
            labels = {
                **template["spec"]["template"]["metadata"]["labels"],
                "batch.kubernetes.io/job-name": job,
                "batch.kubernetes.io/job-completion-index": str(index),
            }
            self.core.create_namespaced_pod(
                self.namespace,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "labels": labels,
                        "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                    },
                    "spec": {**template["spec"]["template"]["spec"], "nodeName": node},
                },
            )
            self.pod_status(name, "Running", {"running": {"startedAt": at}}, at)
            names.append(name)
        return names

    def pod_status(self, pod: str, phase: str, state: dict[str, Any], started: str) -> None:
        status = {
            "phase": phase,
            "startTime": started,
            "containerStatuses": [
                {
                    "name": "main",
                    "image": "registry.example.com/ml/train",
                    "imageID": "",
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "state": state,
                }
            ],
        }
        self.provider.client.merge_patch(
            POD, pod, self.namespace, {"status": status}, "kubelet", "status"
        )

    def delete_pods(self, names: list[str]) -> None:
        for name in names:
            self.core.delete_namespaced_pod(name, self.namespace)


def _checkpoint(folder: Path, step: int) -> Path:
    folder.mkdir(parents=True)
    data = f"weights at {step}".encode() * 50
    (folder / "model.bin").write_bytes(data)
    files = [{"path": "model.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}]
    (folder / "manifest.json").write_text(json.dumps({"step": step, "files": files}))
    return folder


@pytest.fixture
def cluster(
    tmp_path: Path, kube_api: KubeAPI, s3_env: S3Server
) -> Iterator[tuple[Cluster, str, dict[str, str]]]:
    prefix = unique_prefix()
    folder = SpecFolder(platform_folder(tmp_path / "specs", kube_api, prefix))
    folder.converge()
    folder.close()
    store = {"endpoint_url": s3_env.endpoint, "region": REGION, "addressing_style": "path"}
    provider = KubernetesProvider(KubeClient(make_api_client(str(kube_api.kubeconfig), "")))
    provider.configure(
        "k8s",
        {"namespacePrefix": prefix, "namePrefix": prefix},
        ProviderContext(tmp_path, object_store=store),
    )
    yield Cluster(provider, kube_api, prefix), f"s3://{s3_env.new_bucket()}/vision/resnet", store
    provider.close()


def test_a_killed_run_resumes_after_its_backoff_and_its_timeline_logs_and_usage_are_kept(
    cluster: tuple[Cluster, str, dict[str, str]], tmp_path: Path, kube_api: KubeAPI
) -> None:
    world, prefix, store = cluster
    provider, namespace = world.provider, world.namespace
    checkpoints = S3Checkpoints(f"{prefix}/{RUN}", connection=store)
    first = launch(checkpoint_prefix=prefix, retries=2, backoff=BACKOFF)
    job1 = job_name(first)
    before = shifted(stamp(), -1)

    # attempt 1: submitted, waits on its quota, is admitted, runs on two nodes
    provider.submit(first)
    pending_at = next_second()
    world.workload(
        job1, [condition("QuotaReserved", "False", "Pending", INSUFFICIENT, pending_at)], False
    )
    [run] = provider.runs(ADDRESS)
    [queued] = run.attempts
    assert (queued.phase, queued.cause, queued.admitted_at) == (RunPhase.QUEUED, "", "")
    assert queued.waits == [WaitSpan(f"no quota reserved: Pending: {INSUFFICIENT}", pending_at)]

    admitted_at = next_second()
    world.admit(job1, admitted_at)
    started_at = next_second()
    world.job_status(job1, {"startTime": started_at, "active": 2})
    pods1 = world.start_pods(job1, ["node-a", "node-b"], started_at)
    kube_api.set_pod_log(namespace, pods1[0], "step 1\nstep 100: checkpoint\n")
    kube_api.set_pod_log(namespace, pods1[1], "worker 1 ready\n")
    kube_api.reset_requests()
    running = provider.runs(ADDRESS)[0].attempts[0]
    assert [r.path.rsplit("/", 1)[-1] for r in kube_api.requests if "/namespaces/" in r.path] == [
        f"trainform-runs-{short_hash(ADDRESS)}",
        "jobs",
        "workloads",
        "pods",
    ]
    assert (running.phase, running.started_at, running.hosts) == (
        RunPhase.RUNNING,
        started_at,
        ["node-a", "node-b"],
    )
    lead_only = provider.read_log(ADDRESS, RUN, 1)
    assert (lead_only.text, lead_only.complete) == (
        f"==> pod {pods1[0]} on node-a (index 0) <==\nstep 1\nstep 100: checkpoint\n",
        False,
    )
    assert provider.read_log(ADDRESS, RUN, 1, offset=lead_only.next_offset).text == ""

    # it checkpoints at step 100 and 200 (which is then damaged), and is OOM-killed
    checkpoints.publish(_checkpoint(tmp_path / "a" / "step-100", 100))
    next_second()  # S3 too keeps seconds
    checkpoints.publish(_checkpoint(tmp_path / "b" / "step-200", 200))
    checkpoints.client.put_object(
        Bucket=checkpoints.bucket, Key=f"{checkpoints.prefix}/step-200/model.bin", Body=b"torn"
    )
    kube_api.set_pod_log(namespace, pods1[0], "step 200: checkpoint\n", append=True)
    failed_at = next_second()
    oom = {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": failed_at}}
    killed = {"terminated": {"exitCode": 143, "reason": "Error", "finishedAt": failed_at}}
    world.pod_status(pods1[0], "Failed", oom, started_at)
    world.pod_status(pods1[1], "Failed", killed, started_at)
    world.job_status(
        job1,
        {
            "active": 0,
            "failed": 2,
            "conditions": [
                condition("FailureTarget", "True", "BackoffLimitExceeded", "", failed_at),
                condition(
                    "Failed",
                    "True",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    failed_at,
                ),
            ],
        },
    )
    dead = provider.runs(ADDRESS)[0].attempts[0]
    assert (dead.phase, dead.cause, dead.exit_code, dead.ended_at) == (
        RunPhase.FAILED,
        Cause.OUT_OF_MEMORY,
        137,
        failed_at,
    )
    assert dead.reason == (  # a 2-node job: the reason names the node
        f"node 0 (pod {pods1[0]} on node-a): container main exited with code 137 (OOMKilled)"
    )
    assert dead.last_step == 200

    # attempt 2 after the backoff, from the latest valid checkpoint, as the engine submits it
    due = datetime.datetime.fromisoformat(shifted(failed_at, retry_delay(BACKOFF, 1)))
    time.sleep(max(0.0, (due - datetime.datetime.now(datetime.UTC)).total_seconds()))
    [latest_valid] = [c.id for c in provider.runs(ADDRESS)[0].checkpoints if c.valid]
    assert latest_valid == "step-100"
    second = launch(2, checkpoint_prefix=prefix, retries=2, backoff=BACKOFF, resume_from="step-100")
    job2 = job_name(second)
    provider.submit(second)
    archive1 = f"{prefix}/{RUN}/logs/attempt-1.log"
    admitted2 = next_second()
    world.admit(job2, admitted2)
    world.job_status(job2, {"startTime": admitted2, "active": 2})
    pods2 = world.start_pods(job2, ["node-c", "node-d"], admitted2)
    kube_api.set_pod_log(namespace, pods2[0], "resumed from step 100\nstep 300: checkpoint\n")
    kube_api.set_pod_log(namespace, pods2[1], "worker 1 ready\n")
    checkpoints.publish(_checkpoint(tmp_path / "c" / "step-300", 300))
    ended2 = next_second()
    for pod in pods2:
        done = {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": ended2}}
        world.pod_status(pod, "Succeeded", done, admitted2)
    world.job_status(
        job2,
        {
            "active": 0,
            "succeeded": 2,
            "completionTime": ended2,
            "conditions": [condition("Complete", "True", "", "", ended2)],
        },
    )

    # the timeline, field by field
    [run] = provider.runs(ADDRESS)
    one, two = run.attempts
    submitted1 = one.submitted_at
    assert before <= submitted1 < pending_at < admitted_at < started_at < failed_at
    assert (one.admitted_at, one.started_at, one.ended_at) == (admitted_at, started_at, failed_at)
    assert one.waits == [
        WaitSpan(
            f"waited for quota in ClusterQueue {world.prefix}train (Kueue keeps no earlier reason)",
            submitted1,
            admitted_at,
        )
    ]
    assert (one.cause, one.exit_code, one.last_step, one.resumed_step) == (
        Cause.OUT_OF_MEMORY,
        137,
        200,
        None,
    )
    assert (one.queue, one.nodes, one.gpus, one.cpus, one.hosts) == (
        "train",
        2,
        16,
        16.0,
        ["node-a", "node-b"],
    )
    assert one.log == archive1
    assert two.submitted_at >= shifted(failed_at, retry_delay(BACKOFF, 1))
    assert two.submitted_at <= two.admitted_at == two.started_at == admitted2 < two.ended_at
    assert two.ended_at == ended2
    assert (two.phase, two.cause, two.exit_code) == (RunPhase.SUCCEEDED, Cause.SUCCEEDED, 0)
    assert (two.resumed_from, two.resumed_step, two.last_step, two.eligible_at) == (
        "step-100",
        100,
        300,
        "",
    )
    assert two.hosts == ["node-c", "node-d"]
    written = {c.id: (c.valid, c.written_at, c.size) for c in run.checkpoints}
    assert [(i, w[0]) for i, w in written.items()] == [
        ("step-100", True),
        ("step-200", False),
        ("step-300", True),
    ]
    assert written["step-100"][2] == len(b"weights at 100") * 50
    at = {name: parse_time(w[1]) for name, w in written.items()}
    assert parse_time(started_at) <= at["step-100"] < at["step-200"] < parse_time(failed_at)
    assert parse_time(admitted2) <= at["step-300"] < parse_time(ended2)

    timelines = attempt_timelines(run)
    first_line, second_line = timelines
    assert first_line.waited == seconds_between(submitted1, started_at)
    assert first_line.ran == seconds_between(started_at, failed_at)
    assert [c.id for c in first_line.checkpoints] == ["step-100", "step-200"]
    assert second_line.lost_steps == 100
    assert second_line.lost_seconds == seconds_between(written["step-100"][1], failed_at)
    assert [c.id for c in second_line.checkpoints] == ["step-300"]
    cycle = delivery(timelines)
    assert cycle.lost_steps == 100 and cycle.attempts == 2 and cycle.ended == ended2

    # logs: both attempts, from the pods, then from the archive once the pods are gone
    whole1 = (
        f"==> pod {pods1[0]} on node-a (index 0) <==\n"
        "step 1\nstep 100: checkpoint\nstep 200: checkpoint\n"
        f"==> pod {pods1[1]} on node-b (index 1) <==\nworker 1 ready\n"
    )
    assert provider.read_log(ADDRESS, RUN, 1).text == whole1
    world.delete_pods(pods1)
    archived = provider.read_log(ADDRESS, RUN, 1)
    assert (archived.text, archived.complete, archived.location) == (whole1, True, archive1)
    tail = provider.read_log(ADDRESS, RUN, 1, offset=len(whole1.encode()) - 15)
    assert (tail.text, tail.next_offset) == ("worker 1 ready\n", len(whole1.encode()))
    whole2 = (
        f"==> pod {pods2[0]} on node-c (index 0) <==\nresumed from step 100\n"
        f"step 300: checkpoint\n==> pod {pods2[1]} on node-d (index 1) <==\nworker 1 ready\n"
    )
    done2 = provider.read_log(ADDRESS, RUN, 2)
    assert (done2.text, done2.complete) == (whole2, True)
    provider.cancel(ADDRESS)  # a write: attempt 2 is recorded and its log archived
    world.delete_pods(pods2)
    assert provider.read_log(ADDRESS, RUN, 2).location == f"{prefix}/{RUN}/logs/attempt-2.log"
    assert provider.read_log(ADDRESS, RUN, 2).text == whole2
    with pytest.raises(PermanentProviderError, match="trainform submitted no such attempt"):
        provider.read_log(ADDRESS, RUN, 3)

    # recorded facts outlive the Jobs
    for name in (job1, job2):
        provider.client.delete(JOB, name, namespace)
    kube_api.reset_requests()
    [kept] = provider.runs(ADDRESS)
    assert kube_api.count(path_prefix="/api/v1/namespaces/") == 1  # the ledger; no pods
    assert [(a.phase, a.cause, a.ended_at) for a in kept.attempts] == [
        (RunPhase.FAILED, Cause.OUT_OF_MEMORY, failed_at),
        (RunPhase.SUCCEEDED, Cause.SUCCEEDED, ended2),
    ]
    assert kept.attempts[1].hosts == ["node-c", "node-d"]

    # accounting: the run from its own records, with project, queue and pool
    [accounted] = [a for a in provider.accounting(before) if a.address == ADDRESS]
    assert (accounted.project, accounted.queue, accounted.pool) == ("vision", "train", "h100")
    assert [a.attempt for a in accounted.run.attempts] == [1, 2]
    assert accounted.run.attempts[0].gpus == 16
    assert [a for a in provider.accounting(shifted(ended2, 1)) if a.address == ADDRESS] == []


@pytest.mark.parametrize(
    ("pod", "job_reason", "cause", "code"),
    [
        pytest.param(
            {"state": {"terminated": {"exitCode": 1, "reason": "Error"}}},
            "BackoffLimitExceeded",
            Cause.CODE_ERROR,
            1,
            id="exit-code",
        ),
        pytest.param(
            {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}},
            "BackoffLimitExceeded",
            Cause.OUT_OF_MEMORY,
            137,
            id="oom",
        ),
        pytest.param({}, "DeadlineExceeded", Cause.TIME_LIMIT, None, id="deadline"),
        pytest.param(
            {
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "DeletionByTaintManager",
                    }
                ]
            },
            "BackoffLimitExceeded",
            Cause.NODE_FAILURE,
            None,
            id="node-lost",
        ),
        pytest.param(
            {"reason": "Evicted", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}},
            "BackoffLimitExceeded",
            Cause.NODE_FAILURE,
            None,
            id="evicted",
        ),
        pytest.param(
            {
                "state": {
                    "terminated": {
                        "exitCode": 2,
                        "reason": "Error",
                        "message": "trainform: attempt refused: dataset imagenet@v3 changed",
                    }
                }
            },
            "BackoffLimitExceeded",
            Cause.REFUSED,
            2,
            id="refused",
        ),
        pytest.param({}, "BackoffLimitExceeded", Cause.CODE_ERROR, None, id="no-pod-left"),
    ],
)
def test_a_failed_attempt_is_classified_from_its_job_and_pods(
    pod: dict[str, Any], job_reason: str, cause: str, code: int | None
) -> None:
    job = {
        "metadata": {"name": "j", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"suspend": False, "completions": 1},
        "status": {
            "startTime": "2026-01-01T00:00:10Z",
            "conditions": [condition("Failed", "True", job_reason, "", "2026-01-01T00:01:00Z")],
        },
    }
    pods = []
    if pod:
        status: dict[str, Any] = {"phase": "Failed"}
        if "state" in pod:
            status["containerStatuses"] = [{"name": "main", "state": pod["state"]}]
        status.update({k: v for k, v in pod.items() if k in ("reason", "conditions")})
        pods = [{"metadata": {"name": "j-0"}, "spec": {"nodeName": "n1"}, "status": status}]

    status_of = attempt_status({"attempt": 1, "job": "j"}, job, None, pods)

    assert (status_of.phase, status_of.cause, status_of.exit_code) == (RunPhase.FAILED, cause, code)
    assert status_of.ended_at == "2026-01-01T00:01:00Z"


def test_kueue_preemption_and_a_cancel_are_their_own_causes() -> None:
    job = {
        "metadata": {"name": "j"},
        "spec": {"suspend": False},
        "status": {"conditions": [condition("Failed", "True", "BackoffLimitExceeded", "", "t")]},
    }
    workload = {
        "status": {"conditions": [condition("Evicted", "True", "Preempted", "to make room", "t")]}
    }
    assert attempt_status({"job": "j"}, job, workload).cause == Cause.PREEMPTED
    cancelled = attempt_status(
        {"job": "j", "cancelled": True, "cancelledAt": "2026-01-01T00:02:00Z"}, job, None
    )
    assert (cancelled.phase, cancelled.cause, cancelled.ended_at) == (
        RunPhase.CANCELLED,
        Cause.CANCELLED,
        "2026-01-01T00:02:00Z",
    )
