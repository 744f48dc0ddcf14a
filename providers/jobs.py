"""The job side of the provider interface: submitting runs, cancelling them, reading them.

A TrainingJob is reconciled as a state machine by the engine (planner/jobs.py); providers
that run jobs implement `JobProvider`. Vocabulary:

- a *run* is one reproducible training run: its id derives from the hash of everything
  that makes it reproducible (image digest, dataset digests, code identity, command,
  parameters, resources). A change to any of those is a new run; old runs stay in history.
- an *attempt* is one submission of a run: the first, and each resume after a failure or
  preemption, which starts from the latest valid checkpoint.
- an *evaluation* is a run of an EvalSuite's evaluator on a run's final model (or on a
  checkpoint), whose metrics JSON the provider records.

Checkpoints follow one layout everywhere: a checkpoint is a folder (or prefix) named
`step-<N>` holding `manifest.json` = {"step": N, "files": [{"path", "size", "sha256"}]},
written last. A checkpoint is valid only if its manifest is present and every listed file
exists with the listed size and sha256. Only valid checkpoints are resumed from.

Environment a job receives (the README documents it for users):
  TRAINFORM_JOB, TRAINFORM_RUN_ID, TRAINFORM_ATTEMPT
  TRAINFORM_CHECKPOINT_DIR, TRAINFORM_CHECKPOINT_INTERVAL (seconds), TRAINFORM_KEEP_LAST
  TRAINFORM_RESUME_FROM (folder of the checkpoint to resume from, or empty), TRAINFORM_RESUME_STEP
  TRAINFORM_OUTPUT_DIR, TRAINFORM_PROGRESS_FILE (the job may write {"step": N} there)
  TRAINFORM_DATASET_<NAME> (folder of each pinned dataset version; NAME upper-cased, '-' -> '_')
  TRAINFORM_DATASET_<NAME>_URI (datasets kept on S3: the version's s3:// location)
  TRAINFORM_PARAM_<NAME> (each parameter as text) and TRAINFORM_PARAMETERS (all, as JSON)
  TRAINFORM_NODES, TRAINFORM_NODE_INDEX (multi-node providers: the run's nodes, this node)
  evaluations also: TRAINFORM_MODEL_DIR, TRAINFORM_METRICS_FILE, TRAINFORM_EVAL_SUITE
  TRAINFORM_EVENTS_FILE (where the job may append its run events: trainform.runtime)
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

MAX_RETRY_DELAY = 3600


class Cause(enum.StrEnum):
    """Why an attempt ended, in classes a person acts on differently."""

    SUCCEEDED = "succeeded"
    CODE_ERROR = "code-error"  # the job's command exited non-zero (or crashed by itself)
    OUT_OF_MEMORY = "out-of-memory"
    NODE_FAILURE = "node-failure"  # the node, the supervisor or the platform failed under it
    PREEMPTED = "preempted"
    TIME_LIMIT = "time-limit"
    CANCELLED = "cancelled"
    REFUSED = "refused"  # refused before start: data mutated, checkpoint invalid, no image


def utc_text(moment: datetime) -> str:
    """`moment` as run records hold times: ISO-8601 UTC with milliseconds and `Z`."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_utc(text: str) -> datetime | None:
    """A recorded time (a naive one is UTC); None for "" or something unreadable."""
    if not text or not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def retry_delay(backoff: int, failed_attempts: int) -> int:
    """Seconds to wait before resubmitting after the `failed_attempts`-th failure.

    `retries.backoff` doubles with every failure of the run (backoff, 2x, 4x ...), and is
    capped at one hour or at the backoff itself when that is longer."""
    if backoff <= 0:
        return 0
    growth = backoff * 2 ** max(0, min(failed_attempts - 1, 20))
    return min(growth, max(MAX_RETRY_DELAY, backoff))


class RunPhase(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (RunPhase.SUCCEEDED, RunPhase.FAILED, RunPhase.CANCELLED)


@dataclass(frozen=True)
class DatasetInput:
    """A pinned dataset version a run reads."""

    name: str
    address: str
    version: str
    manifest_digest: str
    document: dict[str, Any]


@dataclass(frozen=True)
class JobLaunch:
    """One attempt to start: a training run (kind "train") or an evaluation (kind "eval")."""

    address: str
    run_id: str
    attempt: int
    kind: str
    project: str | None
    queue: str
    priority: int
    command: list[str]
    code_dir: str | None
    parameters: dict[str, Any]
    env: dict[str, str]
    datasets: list[DatasetInput]
    cpu: str
    memory: str
    gpus: int
    nodes: int
    checkpoint_interval: int | None = None
    keep_last: int | None = None
    checkpoint_prefix: str = ""
    resume_from: str | None = None
    max_runtime: int | None = None
    suite: str | None = None
    model_run: str | None = None
    image: str = ""
    """Container image reference (repository@digest) for providers that run containers."""
    retries: int = 0
    """`retries.limit`: resubmissions after a failure, made by the provider on its own."""
    backoff: int = 0
    """`retries.backoff` in seconds (grows as `retry_delay` says)."""
    resume: str = "latest"
    """`resume.policy`: resume a retry from the latest valid checkpoint, or start over."""
    eligible_at: str = ""
    """A resubmission after a failure: when its retry backoff ended (ISO-8601 UTC)."""
    procs_per_node: int = 0
    """`resources.procsPerNode` as declared; 0 when not declared (then the launch contract
    takes the accelerators per node, else 1: providers/launch.py `processes_per_node`)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["datasets"] = [asdict(d) for d in self.datasets]
        if not self.image:
            del data["image"]  # host runtimes need none; keeps plans of those unchanged
        if not self.procs_per_node:
            del data["procs_per_node"]  # undeclared: launches recorded before it stay equal
        return data

    def resources(self) -> dict[str, Any]:
        """The launch's `resources` as a spec declares them, for providers/launch.py."""
        resources: dict[str, Any] = {
            "nodes": self.nodes,
            "acceleratorsPerNode": self.gpus // max(self.nodes, 1),
        }
        if self.procs_per_node:
            resources["procsPerNode"] = self.procs_per_node
        return resources


@dataclass
class CheckpointStatus:
    id: str
    step: int
    valid: bool
    problem: str = ""
    path: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    written_at: str = ""
    """When the checkpoint was complete (its manifest written), ISO-8601 UTC."""
    size: int = 0
    """Bytes of the files its manifest lists."""


@dataclass
class LauncherStatus:
    """One node's launcher of a distributed attempt, where the provider records it."""

    node: int
    host: str = ""
    log: str = ""
    started_at: str = ""
    ended_at: str = ""
    exit_code: int | None = None


@dataclass
class WaitSpan:
    """One reason an attempt waited, from when it was first seen until it changed."""

    reason: str
    since: str
    until: str = ""


@dataclass
class RunSpan:
    """One stretch an attempt ran. An attempt the platform requeued (preempted, its node
    failed, an administrator's requeue) runs more than once: each run is a span, with
    what stopped it and the platform's own measure of its run time."""

    started_at: str
    ended_at: str = ""
    """"" while it runs."""
    stopped_by: str = ""
    """What ended a run the attempt went on after: `preempted`, `requeued`,
    `node-failure`; "" for the attempt's last run."""
    elapsed: float | None = None
    """Seconds the platform accounts for the run (Slurm's Elapsed), where it says."""
    gpus: int = 0
    cpus: float = 0.0
    resumed_step: int | None = None
    """The checkpoint step this run resumed from (None: from the start)."""
    last_step: int | None = None
    """The last step this run reached, where recorded."""
    eligible_at: str = ""
    """Not started before this time (the platform's hold after a requeue)."""


@dataclass
class AttemptStatus:
    """One attempt's timeline, read from the provider's own records (times ISO-8601 UTC,
    "" where not reached or not recorded)."""

    attempt: int
    phase: RunPhase
    reason: str = ""
    exit_code: int | None = None
    submitted_at: str = ""
    started_at: str = ""
    ended_at: str = ""
    log: str = ""
    resumed_from: str = ""
    eligible_at: str = ""
    """Not before this time (a retry waiting for its backoff)."""
    admitted_at: str = ""
    """When the scheduler admitted it (Kueue admission, Slurm start, local admission)."""
    waits: list[WaitSpan] = field(default_factory=list)
    cause: str = ""
    """A `Cause` value once finished, "" before."""
    resumed_step: int | None = None
    """The step of the checkpoint it resumed from."""
    last_step: int | None = None
    """The last step it reached (progress file or newest checkpoint it wrote)."""
    queue: str = ""
    nodes: int = 1
    gpus: int = 0
    """Accelerators of the whole attempt (all nodes)."""
    cpus: float = 0.0
    """CPU cores of the whole attempt (all nodes)."""
    hosts: list[str] = field(default_factory=list)
    """Nodes it ran on, where the provider records them (in node-rank order where known)."""
    procs_per_node: int | None = None
    """Processes per node, all in one process group of nodes x procs_per_node ranks, where
    the provider records it (providers/launch.py)."""
    launchers: list[LauncherStatus] = field(default_factory=list)
    """Each node's launcher (its host, log, start, end), where the provider records them."""
    runs: list[RunSpan] = field(default_factory=list)
    """Each time the attempt ran, where the provider records it (one span, or one per
    requeue); empty: it ran once, from started_at to ended_at."""
    queue_position: int | None = None
    """While queued: its place among the workloads waiting in its queue, counted from 0 as
    the scheduler counts (Kueue's positionInLocalQueue), where the provider knows it."""
    queue_pending: int = 0
    """While queued: how many workloads wait in its queue (0 when not known)."""
    queue_position_source: str = ""
    """Where the position comes from ("visibility API", "Workload order")."""
    events: dict[str, Any] | None = None
    """What the attempt's own run events say (providers/run_events.py `summarize_events`),
    where the job wrote them and the provider collected them; None: none."""


@dataclass
class EvaluationStatus:
    suite: str
    run_id: str
    phase: RunPhase
    metrics: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    log: str = ""


@dataclass
class RunStatus:
    run_id: str
    attempts: list[AttemptStatus] = field(default_factory=list)
    checkpoints: list[CheckpointStatus] = field(default_factory=list)
    current_step: int | None = None
    evaluations: list[EvaluationStatus] = field(default_factory=list)
    output_dir: str = ""

    @property
    def latest(self) -> AttemptStatus | None:
        return self.attempts[-1] if self.attempts else None

    def latest_valid_checkpoint(self) -> CheckpointStatus | None:
        valid = [c for c in self.checkpoints if c.valid]
        return max(valid, key=lambda c: c.step) if valid else None


@dataclass
class LogChunk:
    """Part of an attempt's log from `offset`: `text`, where the next read starts, and
    whether the log is complete (the attempt finished and everything was read)."""

    text: str
    next_offset: int
    complete: bool
    location: str = ""


@dataclass
class AccountedRun:
    """A run as the provider's own accounting knows it, with where it ran."""

    address: str
    project: str | None
    queue: str
    run: RunStatus
    pool: str = ""


@runtime_checkable
class JobProvider(Protocol):
    """What a provider that runs jobs implements, besides the resource verbs."""

    def submit(self, launch: JobLaunch) -> dict[str, Any]:
        """Record and queue one attempt; idempotent for the same (run_id, attempt, kind,
        suite). Returns outputs for state ({"runId", "attempt"})."""

    def cancel(self, address: str, run_id: str) -> None:
        """Stop every unfinished attempt and evaluation of the run; keeps checkpoints."""

    def runs(self, address: str) -> list[RunStatus]:
        """Every run of the job this provider knows, oldest first, read-only."""


@runtime_checkable
class RunRecords(Protocol):
    """What a provider that runs jobs also offers to read them after the fact (`logs`,
    `usage`, `status --platform`); kept apart so a JobProvider check needs only the verbs."""

    def read_log(
        self, address: str, run_id: str, attempt: int, offset: int = 0, suite: str | None = None
    ) -> LogChunk:
        """The training attempt's log (or the evaluation's, with `suite`) from byte
        `offset`; raises ProviderError when there is none. Logs outlive the job."""

    def accounting(self, since: str) -> list[AccountedRun]:
        """Every run this provider's manager submitted with an attempt that ended at or
        after `since` (ISO-8601 UTC) or has not ended, from the platform's own records
        (jobs no longer in the specs included)."""
