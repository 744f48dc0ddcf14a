"""The job side of the provider interface: submitting runs, cancelling them, reading them.

A TrainingJob is reconciled as a state machine by the engine (planner/jobs.py); providers
that run jobs implement `JobProvider`. Vocabulary:

- a *run* is one reproducible training run: its id derives from the hash of everything
  that makes it reproducible (image digest, dataset digests, code commit, command,
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
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


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

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["datasets"] = [asdict(d) for d in self.datasets]
        if not self.image:
            del data["image"]  # host runtimes need none; keeps plans of those unchanged
        return data


@dataclass
class CheckpointStatus:
    id: str
    step: int
    valid: bool
    problem: str = ""
    path: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class AttemptStatus:
    attempt: int
    phase: RunPhase
    reason: str = ""
    exit_code: int | None = None
    submitted_at: str = ""
    started_at: str = ""
    ended_at: str = ""
    log: str = ""
    resumed_from: str = ""


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
