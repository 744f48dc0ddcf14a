"""An attempt's timeline from the objects Kubernetes and Kueue keep: the facts of one
AttemptStatus, from its ledger entry, its Job, its Workload and the Job's pods.

Times, each the platform's own record (RFC3339, second resolution):
- submitted: the Job's creationTimestamp (else the ledger's submittedAt);
- admitted: the Workload's Admitted condition (else QuotaReserved) when True;
- started: the Job's status.startTime (else the first pod's status.startTime);
- ended: the Job's Complete (completionTime) or Failed condition; a cancel's time from the
  ledger; for a Job deleted outside trainform, the last container's finishedAt if a pod
  is left.

Waits (WaitSpan), from the Workload's conditions; Kueue keeps only the latest message of
each, so what is there is recorded: QuotaReserved=False (why no quota, since its
lastTransitionTime), Admitted=False after quota (admission checks), Evicted=True (requeued
by Kueue, since the eviction). Once quota is reserved Kueue has overwritten its pending
message: the wait from submission to the reservation is kept as a span saying so.

Cause, once finished (first evidence wins, the pod that failed first among several):
- ledger cancelled -> cancelled; Job Complete -> succeeded;
- Job Failed with reason DeadlineExceeded (activeDeadlineSeconds) -> time-limit;
- the Workload Evicted or Preempted (True) when the Job failed -> preempted;
- a failed pod: its container terminated with a termination message starting
  `trainform: attempt refused` (what a runner that checks data and checkpoints before
  starting the command writes to /dev/termination-log) -> refused; reason OOMKilled ->
  out-of-memory; condition DisruptionTarget (PreemptionByScheduler -> preempted, any other
  reason: taint manager, eviction API, pod GC of a lost node, kubelet shutdown) or pod
  reason Evicted / NodeLost / Terminated / Shutdown / UnexpectedAdmissionError /
  NodeAffinity -> node-failure; pod reason DeadlineExceeded -> time-limit; exit code != 0
  -> code-error (the exit code recorded); of a job of several nodes the reason names the
  node (the pod's completion index): `node 2 (pod <name> on <host>): container main
  exited with code 3 (Error)`;
- a Failed Job without pod evidence -> code-error; a Job deleted outside trainform ->
  node-failure;
- a Workload Kueue deactivated (`spec.active: false`; its Job suspended, never Failed)
  ends the attempt at its eviction, in Kueue's words: maximum execution time ->
  time-limit, another Kueue cause -> node-failure, set inactive by hand -> cancelled
  (deactivation.py); waits seen from the eviction on are its, not the attempt's.

Size: nodes from the Job's completions, cpus and gpus from the pod template's requests
times nodes (the ledger's copy when the Job is gone); hosts from the pods' spec.nodeName,
once each in node-rank order; processes per node as the ledger recorded them at submission.
Once trainform records an attempt's facts in its ledger entry (`final`, written at the next
submit or cancel), they are read from there. Pure; no I/O.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import asdict
from decimal import Decimal
from typing import Any

from trainform.providers.jobs import AttemptStatus, Cause, RunPhase, RunSpan, WaitSpan
from trainform.providers.kubernetes.deactivation import deactivation
from trainform.providers.kubernetes.kinds import ApiKind
from trainform.providers.kubernetes.requeues import preemption_of, requeued_waits, with_runs
from trainform.specs.quantity import parse_quantity

POD = ApiKind("Pod", "v1", "pods", True)
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
REFUSED_MARK = "trainform: attempt refused"
DELETED = "Job deleted outside trainform"
NODE_REASONS = {
    "Evicted",
    "NodeLost",
    "Terminated",
    "Shutdown",
    "UnexpectedAdmissionError",
    "NodeAffinity",
}
NOT_ACCELERATORS = {"cpu", "memory", "ephemeral-storage", "pods"}
_STEP = re.compile(r"(\d+)$")


def condition(obj: dict[str, Any] | None, kind: str, status: str | None = "True") -> dict | None:
    """The object's condition of type `kind` (with that status, unless None)."""
    for found in ((obj or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind and (status is None or found.get("status") == status):
            return dict(found)
    return None


def said(found: dict[str, Any] | None) -> str:
    if not found:
        return ""
    reason, message = found.get("reason", ""), found.get("message", "")
    return f"{reason}: {message}" if reason and message else reason or message


def why_pending(workload: dict[str, Any] | None) -> str:
    """Kueue's own words on why an attempt waits."""
    if workload is None:
        return "waiting for Kueue to create the Workload"
    for kind in ("Evicted", "Preempted"):
        found = condition(workload, kind)
        if found:
            return f"{kind.lower()} by Kueue ({said(found)}); requeued"
    reserved = condition(workload, "QuotaReserved", None)
    if reserved is None or reserved.get("status") != "True":
        return f"no quota reserved: {said(reserved) or 'pending in the ClusterQueue'}"
    admitted = condition(workload, "Admitted", None)
    return f"quota reserved, not yet admitted: {said(admitted) or 'admission checks pending'}"


def pod_index(pod: dict[str, Any]) -> int:
    metadata = pod.get("metadata") or {}
    text = (metadata.get("annotations") or {}).get(COMPLETION_INDEX) or (
        metadata.get("labels") or {}
    ).get(COMPLETION_INDEX, "0")
    try:
        return int(text)
    except ValueError:
        return 0


def pods_by_job(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Pods grouped by the Job that made them, by completion index then age."""
    found: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        job = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL)
        if job:
            found.setdefault(str(job), []).append(pod)
    for group in found.values():
        group.sort(key=lambda p: (pod_index(p), p["metadata"].get("creationTimestamp", "")))
    return found


def step_of(checkpoint: str) -> int | None:
    match = _STEP.search(checkpoint.rstrip("/").rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def parse_time(text: str) -> datetime.datetime | None:
    try:
        value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


def later(first: str, second: str) -> bool:
    """Whether time `first` is after time `second` (False when either is unknown)."""
    one, other = parse_time(first), parse_time(second)
    return one is not None and other is not None and one > other


def _number(value: Any) -> Decimal:
    try:
        return parse_quantity(str(value))
    except ValueError:
        return Decimal(0)


def size_of(job: dict[str, Any] | None, entry: dict[str, Any]) -> tuple[int, int, float]:
    """(nodes, gpus, cpus) of the whole attempt: the Job's pod template x its pods."""
    if job is None:
        return (
            int(entry.get("nodes") or 1),
            int(entry.get("gpus") or 0),
            float(entry.get("cpus") or 0.0),
        )
    spec = job.get("spec") or {}
    nodes = int(spec.get("completions") or spec.get("parallelism") or 1)
    gpus, cpus = Decimal(0), Decimal(0)
    for container in ((spec.get("template") or {}).get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        for name, amount in requests.items():
            if name == "cpu":
                cpus += _number(amount)
            elif name not in NOT_ACCELERATORS and not name.startswith("hugepages-"):
                gpus += _number(amount)
    return nodes, int(gpus) * nodes, float(cpus * nodes)


def admission(
    workload: dict[str, Any] | None, submitted_at: str
) -> tuple[str, list[WaitSpan], str]:
    """(admitted at, waits seen, ClusterQueue) from the Workload's conditions."""
    if workload is None:
        return "", [], ""
    status = workload.get("status") or {}
    queue = str((status.get("admission") or {}).get("clusterQueue") or "")
    reserved = condition(workload, "QuotaReserved", None)
    admitted = condition(workload, "Admitted", None)
    waits: list[WaitSpan] = []
    admitted_at = ""
    if reserved is not None and reserved.get("status") == "True":
        reserved_at = str(reserved.get("lastTransitionTime") or "")
        if admitted is not None and admitted.get("status") == "True":
            admitted_at = str(admitted.get("lastTransitionTime") or reserved_at)
        elif admitted is not None:
            waits.append(
                WaitSpan(
                    f"quota reserved, not yet admitted: {said(admitted)}",
                    str(admitted.get("lastTransitionTime") or reserved_at),
                )
            )
        else:
            admitted_at = reserved_at
        if later(reserved_at, submitted_at):
            where = f" in ClusterQueue {queue}" if queue else ""
            waits.insert(
                0,
                WaitSpan(
                    f"waited for quota{where} (Kueue keeps no earlier reason)",
                    submitted_at,
                    reserved_at,
                ),
            )
    elif reserved is not None:
        waits.append(
            WaitSpan(
                f"no quota reserved: {said(reserved) or 'pending in the ClusterQueue'}",
                str(reserved.get("lastTransitionTime") or submitted_at),
            )
        )
    for kind in ("Evicted", "Preempted"):
        found = condition(workload, kind)
        if found:
            since = str(found.get("lastTransitionTime") or "")
            waits.append(WaitSpan(f"{kind.lower()} by Kueue ({said(found)}); requeued", since))
            break
    return admitted_at, waits, queue


def _first_pod_start(pods: list[dict[str, Any]]) -> str:
    starts = [str((p.get("status") or {}).get("startTime") or "") for p in pods]
    return min((s for s in starts if s), default="")


def _terminations(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    found = []
    for entry in status.get("containerStatuses") or []:
        terminated = (entry.get("state") or {}).get("terminated")
        if terminated:
            found.append({**terminated, "container": entry.get("name", "")})
    return found


def node_hosts(pods: list[dict[str, Any]]) -> list[str]:
    """The hosts the pods ran on, once each, in node-rank order."""
    hosts: list[str] = []
    for pod in sorted(pods, key=lambda p: (pod_index(p), str(p["metadata"].get("name")))):
        host = (pod.get("spec") or {}).get("nodeName")
        if host and str(host) not in hosts:
            hosts.append(str(host))
    return hosts


def _pod_evidence(
    pod: dict[str, Any], several: bool = False
) -> tuple[str, int | None, str, str] | None:
    """(cause, exit code, reason, when) a failed pod shows, or None if it shows nothing;
    of a job of `several` nodes, the reason names the node (its completion index)."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    where = f"pod {metadata.get('name', '')}"
    if (pod.get("spec") or {}).get("nodeName"):
        where += f" on {pod['spec']['nodeName']}"
    if several:
        where = f"node {pod_index(pod)} ({where})"
    terminations = sorted(_terminations(pod), key=lambda t: str(t.get("finishedAt") or ""))
    for ended in terminations:
        message = str(ended.get("message") or "")
        if message.startswith(REFUSED_MARK):
            return Cause.REFUSED, ended.get("exitCode"), message.strip(), ended.get("finishedAt")
    disruption = condition(pod, "DisruptionTarget")
    if disruption:
        cause = (
            Cause.PREEMPTED
            if disruption.get("reason") == "PreemptionByScheduler"
            else Cause.NODE_FAILURE
        )
        text = f"{where}: disrupted ({said(disruption)})"
        return cause, None, text, str(disruption.get("lastTransitionTime") or "")
    pod_reason = str(status.get("reason") or "")
    if pod_reason == "DeadlineExceeded":
        return Cause.TIME_LIMIT, None, f"{where}: {pod_reason}", ""
    if pod_reason in NODE_REASONS:
        text = f"{where}: {pod_reason}" + (
            f" ({status['message']})" if status.get("message") else ""
        )
        return Cause.NODE_FAILURE, None, text, ""
    for ended in terminations:
        code = ended.get("exitCode")
        why = str(ended.get("reason") or "")
        text = f"{where}: container {ended['container']} exited with code {code} ({why or 'Error'})"
        if why == "OOMKilled":
            return Cause.OUT_OF_MEMORY, code, text, str(ended.get("finishedAt") or "")
        if isinstance(code, int) and code != 0:
            return Cause.CODE_ERROR, code, text, str(ended.get("finishedAt") or "")
    return None


def failure(
    job: dict[str, Any], workload: dict[str, Any] | None, pods: list[dict[str, Any]]
) -> tuple[str, int | None, str]:
    """(cause, exit code, reason) of a Job that failed."""
    failed = condition(job, "Failed") or {}
    if failed.get("reason") == "DeadlineExceeded":
        return Cause.TIME_LIMIT, None, said(failed)
    for kind in ("Evicted", "Preempted"):
        found = condition(workload, kind)
        if found:
            return Cause.PREEMPTED, None, f"{kind.lower()} by Kueue ({said(found)})"
    several = int(((job.get("spec") or {}).get("completions")) or 1) > 1
    evidence = [
        found
        for pod in pods
        if (pod.get("status") or {}).get("phase") == "Failed"
        for found in [_pod_evidence(pod, several)]
        if found is not None
    ]
    if evidence:
        cause, code, reason, _ = min(evidence, key=lambda e: e[3] or "~")
        return cause, code, reason
    return Cause.CODE_ERROR, None, said(failed) or "Job failed"


def _last_finish(pods: list[dict[str, Any]]) -> str:
    ends = [str(t.get("finishedAt") or "") for pod in pods for t in _terminations(pod)]
    return max((e for e in ends if e), default="")


def attempt_status(
    entry: dict[str, Any],
    job: dict[str, Any] | None,
    workload: dict[str, Any] | None,
    pods: list[dict[str, Any]] | None = None,
) -> AttemptStatus:
    """The attempt as the ledger, its Job, its Workload and its pods tell it; the runs of
    one Kueue preempted (requeues.py)."""
    found = _attempt_status(entry, job, workload, pods)
    if not isinstance(entry.get("final"), dict):
        with_runs(found, preemption_of(workload))
    return found


def _attempt_status(
    entry: dict[str, Any],
    job: dict[str, Any] | None,
    workload: dict[str, Any] | None,
    pods: list[dict[str, Any]] | None = None,
) -> AttemptStatus:
    final = entry.get("final")
    if isinstance(final, dict):
        return recorded(entry, final)
    pods = pods or []
    metadata = (job or {}).get("metadata") or {}
    submitted = str(metadata.get("creationTimestamp") or entry.get("submittedAt") or "")
    nodes, gpus, cpus = size_of(job, entry)
    resumed_from = str(entry.get("resumeFrom") or "")
    base = AttemptStatus(
        attempt=int(entry.get("attempt", 0)),
        phase=RunPhase.QUEUED,
        submitted_at=submitted,
        resumed_from=resumed_from,
        resumed_step=step_of(resumed_from) if resumed_from else None,
        eligible_at=str(entry.get("eligibleAt") or ""),
        log=f"kubectl logs job/{entry.get('job', '')}",
        queue=str(
            entry.get("queue")
            or ((metadata.get("labels") or {}).get("kueue.x-k8s.io/queue-name") or "")
        ),
        nodes=nodes,
        gpus=gpus,
        cpus=cpus,
        hosts=node_hosts(pods),
        procs_per_node=_procs(entry),
    )
    base.admitted_at, base.waits, _ = admission(workload, submitted)
    base.waits = requeued_waits(base.waits, preemption_of(workload))
    status = (job or {}).get("status") or {}
    base.started_at = str(status.get("startTime") or "") or _first_pod_start(pods)
    if entry.get("cancelled"):
        base.phase, base.reason, base.cause = RunPhase.CANCELLED, "cancelled", Cause.CANCELLED
        base.ended_at = str(entry.get("cancelledAt") or "")
        return base
    if job is None:
        base.phase, base.reason, base.cause = RunPhase.FAILED, DELETED, Cause.NODE_FAILURE
        base.ended_at = _last_finish(pods)
        return base
    complete, failed = condition(job, "Complete"), condition(job, "Failed")
    if complete:
        base.phase, base.cause = RunPhase.SUCCEEDED, Cause.SUCCEEDED
        base.ended_at = str(
            status.get("completionTime") or complete.get("lastTransitionTime") or ""
        )
        base.exit_code = 0
    elif failed:
        base.phase = RunPhase.FAILED
        base.cause, base.exit_code, base.reason = failure(job, workload, pods)
        base.ended_at = str(failed.get("lastTransitionTime") or "")
    elif (ended := deactivation(workload)) is not None:
        base.phase, base.cause, base.reason = ended.phase, ended.cause, ended.reason
        base.ended_at = ended.ended_at
        base.waits = [w for w in base.waits if not w.since or later(ended.ended_at, w.since)]
    elif (job.get("spec") or {}).get("suspend", False):
        base.phase, base.reason = RunPhase.QUEUED, why_pending(workload)
    else:
        base.phase = RunPhase.RUNNING
    return base


FINAL_FIELDS = (
    "phase",
    "reason",
    "exit_code",
    "submitted_at",
    "admitted_at",
    "started_at",
    "ended_at",
    "cause",
    "last_step",
    "queue",
    "nodes",
    "gpus",
    "cpus",
    "hosts",
)


def final_facts(status: AttemptStatus) -> dict[str, Any]:
    """What the ledger keeps of a finished attempt, so its timeline outlives its objects."""
    facts: dict[str, Any] = {name: getattr(status, name) for name in FINAL_FIELDS}
    facts["phase"] = str(status.phase)
    facts["waits"] = [[w.reason, w.since, w.until] for w in status.waits]
    if status.runs:
        facts["runs"] = [asdict(r) for r in status.runs]
    return facts


def _procs(entry: dict[str, Any]) -> int | None:
    """Processes per node, as the ledger recorded them at submission (older entries: None)."""
    value = entry.get("procsPerNode")
    return value if isinstance(value, int) and value >= 1 else None


def recorded(entry: dict[str, Any], final: dict[str, Any]) -> AttemptStatus:
    resumed_from = str(entry.get("resumeFrom") or "")
    status = AttemptStatus(
        attempt=int(entry.get("attempt", 0)),
        phase=RunPhase(str(final.get("phase", "failed"))),
        resumed_from=resumed_from,
        resumed_step=step_of(resumed_from) if resumed_from else None,
        eligible_at=str(entry.get("eligibleAt") or ""),
        log=str(entry.get("logArchive") or f"kubectl logs job/{entry.get('job', '')}"),
    )
    for name in FINAL_FIELDS:
        if name != "phase" and name in final:
            setattr(status, name, final[name])
    status.hosts = list(final.get("hosts") or [])
    status.procs_per_node = _procs(entry)
    status.waits = [WaitSpan(*wait) for wait in final.get("waits") or []]
    known = set(RunSpan.__dataclass_fields__)
    status.runs = [
        RunSpan(**{k: v for k, v in r.items() if k in known})
        for r in final.get("runs") or []
        if isinstance(r, dict) and "started_at" in r
    ]
    return status
