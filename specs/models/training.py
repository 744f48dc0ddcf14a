"""Training kinds: TrainingJob and EvalSuite.

A TrainingJob pins everything that makes a run reproducible (image, dataset versions, code
commit, command, parameters, resources) and says how it checkpoints, resumes, retries and
which evaluation suites gate its result. An EvalSuite is an evaluation run with metrics and
gates, optionally relative to a baseline job.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator
from trainform.specs.models.base import DocumentBase, Reference, Scope, SpecModel
from trainform.specs.names import EnvName, GitCommit, ResourceName
from trainform.specs.quantity import Duration, Quantity

DATASET_REF = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(@[A-Za-z0-9][A-Za-z0-9._-]{0,62})?$"
DATASET_REF_HELP = "a dataset reference `name@version`, e.g. corpus@v3"
DatasetRef = Annotated[str, StringConstraints(pattern=DATASET_REF, max_length=127)]
Scalar = str | int | float | bool


def _argument_vector(command: list[str]) -> list[str]:
    """A job's argv runs as given (never through a shell); it must be exec-able as one."""
    if command and command[0].startswith("-"):
        raise ValueError("the program (first element) cannot start with '-'")
    for index, argument in enumerate(command):
        if "\x00" in argument:
            raise ValueError(f"element {index} contains a NUL byte, which no argv can carry")
    return command


Command = Annotated[list[str], AfterValidator(_argument_vector)]


def split_dataset_ref(text: str) -> tuple[str, str | None]:
    name, _, version = text.partition("@")
    return name, version or None


class Code(SpecModel):
    repo: str = Field(
        min_length=1,
        description="Git repository: https://host/path, ssh://[user@]host[:port]/path or "
        "git@host:path, its host listed in security.codeHosts of trainform.yaml; or a folder "
        "relative to the spec folder for code shipped with the specs.",
    )
    commit: GitCommit | None = Field(
        default=None, description="Full commit id; pins the code. Recorded by `trainform lock`."
    )
    ref: str | None = Field(
        default=None, description="Branch or tag, resolved to a commit by `trainform lock`."
    )
    path: str = Field(default="", description="Working directory inside the repository.")

    @model_validator(mode="after")
    def _commit_or_ref(self) -> Code:
        if self.commit and self.ref:
            raise ValueError("give either commit or ref, not both")
        return self


class JobResources(SpecModel):
    nodes: int = Field(default=1, ge=1, le=100_000, description="Nodes (one task per node).")
    accelerators_per_node: int = Field(default=0, ge=0, le=64, description="GPUs per node.")
    procs_per_node: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="Training processes per node, all in one process group with every other "
        "node's (default: acceleratorsPerNode, else 1). See docs/distributed.md.",
    )
    cpu: Quantity = Field(description="CPUs per node.")
    memory: Quantity = Field(description="Memory per node.")

    def total_accelerators(self) -> int:
        return self.nodes * self.accelerators_per_node

    def processes_per_node(self) -> int:
        return self.procs_per_node or self.accelerators_per_node or 1

    def world_size(self) -> int:
        return self.nodes * self.processes_per_node()


class CheckpointPolicy(SpecModel):
    prefix: str = Field(
        default="",
        description="Storage prefix for checkpoints (default: the project's storage prefix "
        "plus the job name).",
    )
    interval: Duration = Field(description="How often the job writes a checkpoint.")
    keep_last: int = Field(default=3, ge=1, le=10_000, description="Checkpoints kept.")


class ResumePolicy(SpecModel):
    policy: Literal["latest", "never"] = Field(
        default="latest",
        description="latest: a failed or preempted run resumes from its latest valid "
        "checkpoint; never: it starts over.",
    )


class RetryPolicy(SpecModel):
    limit: int = Field(default=0, ge=0, le=100, description="Resubmissions after a failure.")
    backoff: Duration = Field(default=Duration("1m"), description="Wait before a resubmission.")


class EvaluationBinding(SpecModel):
    suite: ResourceName = Field(description="EvalSuite to run on the job's output.")
    when: Literal["final", "every-checkpoint"] = Field(
        default="final", description="Evaluate the final model or every checkpoint."
    )


class InitFrom(SpecModel):
    job: ResourceName = Field(description="TrainingJob whose checkpoint initialises this one.")
    checkpoint: str = Field(default="latest", description="`latest` or a step number.")


class TrainingJobSpec(SpecModel):
    queue: ResourceName = Field(description="Queue the job is submitted to.")
    image: ResourceName = Field(description="Image the job runs in.")
    datasets: list[DatasetRef] = Field(
        default_factory=list, description="Datasets read, each pinned as name@version."
    )
    code: Code | None = Field(default=None, description="Code the job runs.")
    command: Command = Field(
        min_length=1,
        description="Argument vector of the entry point, run as given (never by a shell).",
    )
    parameters: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict, description="Hyper-parameters passed to the job."
    )
    env: dict[EnvName, str] = Field(
        default_factory=dict, description="Extra environment variables (no secrets)."
    )
    resources: JobResources = Field(description="Resources per node and node count.")
    checkpoint: CheckpointPolicy | None = Field(default=None, description="Checkpoint policy.")
    resume: ResumePolicy = Field(default_factory=ResumePolicy, description="Resume policy.")
    retries: RetryPolicy = Field(default_factory=RetryPolicy, description="Retry policy.")
    max_runtime: Duration | None = Field(default=None, description="Wall-time limit.")
    priority: int | None = Field(default=None, description="Priority; default from the queue.")
    evaluations: list[EvaluationBinding] = Field(
        default_factory=list, description="Evaluation suites that gate the result."
    )
    init_from: InitFrom | None = Field(
        default=None, description="Start from another job's checkpoint (fine-tuning)."
    )


def dataset_references(datasets: list[str], base: tuple[str | int, ...]) -> list[Reference]:
    refs = []
    for index, text in enumerate(datasets):
        name, version = split_dataset_ref(text)
        refs.append(Reference("Dataset", name, (*base, index), version))
    return refs


class TrainingJob(DocumentBase):
    """A training run, reproducible from what it pins."""

    kind: Literal["TrainingJob"] = Field(description="TrainingJob")
    spec: TrainingJobSpec = Field(description="What to run, where, and how to checkpoint.")
    scope: ClassVar[Scope] = Scope.PROJECT

    def spec_references(self) -> list[Reference]:
        spec = self.spec
        refs = [
            Reference("Queue", spec.queue, ("spec", "queue")),
            Reference("Image", spec.image, ("spec", "image")),
        ]
        refs += dataset_references(spec.datasets, ("spec", "datasets"))
        refs += [
            Reference("EvalSuite", binding.suite, ("spec", "evaluations", index, "suite"))
            for index, binding in enumerate(spec.evaluations)
        ]
        if spec.init_from:
            refs.append(Reference("TrainingJob", spec.init_from.job, ("spec", "initFrom", "job")))
        return refs


class Metric(SpecModel):
    name: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_./-]*$", max_length=128, description="Metric name."
    )
    goal: Literal["maximize", "minimize"] = Field(description="Which direction is better.")


QualifiedName = Annotated[
    str,
    StringConstraints(
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=127
    ),
]


class Baseline(SpecModel):
    job: QualifiedName = Field(
        description="TrainingJob whose evaluated result is the baseline; `project/name` "
        "to name a job of another project."
    )


class CompareTo(SpecModel):
    release: ResourceName = Field(
        description="ModelRelease (of the project of the release being planned) whose "
        "recorded evaluation by this suite is the reference: the run must reach its metric "
        "plus the threshold (the allowed regression)."
    )


class Gate(SpecModel):
    metric: str = Field(description="Metric the gate reads.")
    op: Literal[">=", ">", "<=", "<"] = Field(description="Comparison.")
    threshold: float = Field(
        description="Absolute threshold, or the margin over the baseline when one is given."
    )
    baseline: Baseline | None = Field(
        default=None, description="Compare against this job's metric plus the threshold."
    )
    compare_to: CompareTo | None = Field(
        default=None,
        description="Compare against the currently released model's metric plus the "
        "threshold; judged when a ModelRelease is planned (docs/releases.md).",
    )

    @model_validator(mode="after")
    def _one_reference(self) -> Gate:
        if self.baseline is not None and self.compare_to is not None:
            raise ValueError("a gate compares with a baseline or a release, not both")
        return self


class EvalSuiteSpec(SpecModel):
    image: ResourceName = Field(description="Evaluator image.")
    code: Code | None = Field(default=None, description="Code the evaluator runs.")
    command: Command = Field(
        min_length=1, description="Evaluator argument vector, run as given (never by a shell)."
    )
    datasets: list[DatasetRef] = Field(
        default_factory=list, description="Evaluation datasets, pinned as name@version."
    )
    metrics: list[Metric] = Field(min_length=1, description="Metrics the evaluator writes.")
    gates: list[Gate] = Field(default_factory=list, description="Pass/fail thresholds.")
    resources: JobResources | None = Field(default=None, description="Evaluator resources.")
    timeout: Duration | None = Field(default=None, description="Evaluator wall-time limit.")
    queue: ResourceName | None = Field(
        default=None,
        description="Queue the evaluations run on; default the training job's queue.",
    )
    priority: int | None = Field(
        default=None,
        description="Priority of the evaluations; default the defaultPriority of `queue` "
        "when the suite names one, else the training job's priority.",
    )

    @model_validator(mode="after")
    def _gates_read_declared_metrics(self) -> EvalSuiteSpec:
        names = {metric.name for metric in self.metrics}
        for gate in self.gates:
            if gate.metric not in names:
                raise ValueError(
                    f"gate reads metric {gate.metric!r}, which the suite does not declare "
                    f"(declared: {', '.join(sorted(names))})"
                )
        return self


class EvalSuite(DocumentBase):
    """Evaluation run and gates that pass or fail a checkpoint or model."""

    kind: Literal["EvalSuite"] = Field(description="EvalSuite")
    spec: EvalSuiteSpec = Field(description="Evaluator, datasets, metrics and gates.")
    scope: ClassVar[Scope] = Scope.EITHER

    def spec_references(self) -> list[Reference]:
        spec = self.spec
        refs = [Reference("Image", spec.image, ("spec", "image"))]
        if spec.queue:
            refs.append(Reference("Queue", spec.queue, ("spec", "queue")))
        refs += dataset_references(spec.datasets, ("spec", "datasets"))
        refs += [
            Reference("TrainingJob", gate.baseline.job, ("spec", "gates", index, "baseline", "job"))
            for index, gate in enumerate(spec.gates)
            if gate.baseline
        ]
        return refs
