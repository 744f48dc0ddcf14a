"""Names of an attempt's objects, valid and bounded for any job name: the Job, its headless
Service, its pods' hostnames and node 0's DNS name. Called by jobs.py (manifests), runs.py
(submit, clean-up) and kueue_rules.py (plan-time check).

The API server's rules (k8s.io/kubernetes pkg/apis/batch/validation `ValidateJob`,
pkg/apis/core/validation `ValidateServiceName`, apimachinery `IsDNS1123Label` and
`IsDNS1035Label`) and the Job controller's naming (pkg/controller/job):

- a Job's name is copied into its pods' `batch.kubernetes.io/job-name` label, so it is at
  most 63 characters; an Indexed Job's pod `<index>` gets the hostname `<job>-<index>`, a
  DNS-1123 label, and the server refuses a Job whose last hostname `<job>-<nodes - 1>` is
  not one. So the Job name is a DNS-1123 label of at most 63 - len("-<nodes - 1>")
  characters: `<name>-<run>-<attempt>` (evaluations `<name>-<run>-eval-<suite>-<attempt>`)
  lower-cased, anything else `-`, and when it is longer, cut and followed by `-` and 8 hex
  digits of the sha256 of the full text (naming.dns_label), so two long names never meet;
- a Service's name is a DNS-1035 label (it starts with a letter): the Job's name when it
  is one, else `svc-<job>` (cut and hashed the same way past 63), so a job named
  `7b-llama` gets the Service `svc-7b-llama-<run>-1`;
- pod `<index>` resolves as `<job>-<index>.<service>.<namespace>.svc` (the pod's
  `subdomain` is the Service's name): at most 63 + 1 + 63 + 1 + 63 + 4 = 195 characters,
  within DNS's 253.

Jobs submitted before these bounds keep their recorded names (the ledger holds them), and
single-node names of at most 61 characters, every name a real server accepted, are
unchanged. Pure; no I/O.
"""

from __future__ import annotations

import re

from trainform.providers.jobs import JobLaunch
from trainform.providers.kubernetes.naming import dns_label

LABEL_LIMIT = 63
DNS_NAME_LIMIT = 253
SERVICE_PREFIX = "svc-"
_DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def index_suffix(nodes: int) -> str:
    """What the Job controller appends to the Job's name for the hostname of the last pod."""
    return f"-{max(nodes, 1) - 1}"


def attempt_job_name(
    name: str, run_id: str, attempt: int, nodes: int, suite: str | None = None
) -> str:
    """The Job of attempt `attempt` of run `run_id` of the job `name` on `nodes` nodes
    (an evaluation of `suite` when given)."""
    run = run_id.removeprefix("r-")[:8]
    text = f"{name}-{run}-{attempt}" if suite is None else f"{name}-{run}-eval-{suite}-{attempt}"
    return dns_label(text, LABEL_LIMIT - len(index_suffix(nodes)))


def job_name(launch: JobLaunch) -> str:
    name = launch.address.rsplit("/", 1)[-1]
    suite = (launch.suite or "").rsplit("/", 1)[-1] if launch.kind == "eval" else None
    return attempt_job_name(name, launch.run_id, launch.attempt, launch.nodes, suite)


def service_name(job: str) -> str:
    """The headless Service of the Job `job`: a DNS-1035 label."""
    if len(job) <= LABEL_LIMIT and _DNS_1035_LABEL.fullmatch(job):
        return job
    return dns_label(SERVICE_PREFIX + job, LABEL_LIMIT)


def pod_hostname(job: str, index: int) -> str:
    """The hostname the Job controller gives the Job's pod of completion index `index`."""
    return f"{job}-{index}"


def pod_address(job: str, namespace: str, index: int = 0) -> str:
    """The DNS name of the Job's pod `index` under its headless Service."""
    return f"{pod_hostname(job, index)}.{service_name(job)}.{namespace}.svc"


def name_problems(job: str, nodes: int, namespace: str) -> list[str]:
    """What a real API server would refuse of these names (empty: all valid)."""
    problems = []
    last = pod_hostname(job, max(nodes, 1) - 1)
    if len(last) > LABEL_LIMIT or not _DNS_1123_LABEL.fullmatch(last):
        problems.append(f"pod hostname {last!r} is not a DNS-1123 label of at most 63")
    service = service_name(job)
    if nodes > 1 and (len(service) > LABEL_LIMIT or not _DNS_1035_LABEL.fullmatch(service)):
        problems.append(f"Service name {service!r} is not a DNS-1035 label of at most 63")
    address = pod_address(job, namespace)
    if nodes > 1 and len(address) > DNS_NAME_LIMIT:
        problems.append(f"node 0's DNS name {address!r} is over {DNS_NAME_LIMIT} characters")
    return problems
