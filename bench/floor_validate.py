"""The floor for `trainform validate`: the least work any validator of these specs must do.

Reads the same files (trainform.yaml and every *.yaml / *.yml below the folder, hidden
folders skipped), parses them with the fastest YAML parser available (yaml_rs, else
PyYAML's libyaml CSafeLoader), and validates each document against plain pydantic models
with the same field shapes as trainform's kinds: a discriminated union on `kind`, camelCase
aliases, unknown fields forbidden, but no custom validators, no name patterns, no
quantity or duration parsing, no references, no positions, no templating.

    python bench/floor_validate.py DIR     -> exit 0 when every document fits, 1 otherwise
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

try:
    import yaml_rs

    def load_documents(text: str) -> list[Any]:
        result = yaml_rs.loads(text, parse_datetime=False)
        multi = text.startswith("---") or "\n---" in text
        documents = result if multi and isinstance(result, list) else [result]
        return [document for document in documents if document is not None]

    PARSER = "yaml_rs"
except ImportError:  # pragma: no cover - depends on the environment
    import yaml

    def load_documents(text: str) -> list[Any]:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return [doc for doc in yaml.load_all(text, Loader=loader) if doc is not None]

    PARSER = "pyyaml-" + ("csafe" if hasattr(yaml, "CSafeLoader") else "safe")


class M(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


Q = str | int | float  # quantities
S = str | int | float | bool


class Metadata(M):
    name: str
    project: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class Lifecycle(M):
    prevent_destroy: bool = False


class Doc(M):
    api_version: str
    metadata: Metadata
    lifecycle: Lifecycle | None = None


class ProjectSpec(M):
    display_name: str = ""
    owners: list[str]
    users: list[str] = []
    spec_paths: list[str] = []
    storage_prefix: str = ""


class Accelerator(M):
    type: str
    count: int
    resource_name: str = ""


class Toleration(M):
    key: str
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class PoolSpec(M):
    provider: str
    nodes: int
    accelerator: Accelerator | None = None
    cpu: Q
    memory: Q
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    node_list: str = ""
    features: list[str] = []
    topology: list[str] = []


class Amounts(M):
    gpu: Q | None = None
    cpu: Q | None = None
    memory: Q | None = None


class QueuePool(M):
    pool: str
    nominal_quota: Amounts
    borrowing_limit: Amounts | None = None
    lending_limit: Amounts | None = None


class BorrowWithinCohort(M):
    policy: str = "Never"
    max_priority_threshold: int | None = None


class Preemption(M):
    within_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None


class QueueSpec(M):
    pools: list[QueuePool]
    cohort: str | None = None
    default_priority: int = 0
    preemption: Preemption | None = None
    fair_share_weight: float = 1.0
    queueing_strategy: str = "BestEffortFIFO"
    max_runtime: str | None = None
    stop_policy: str = "None"


class QuotaLimits(M):
    gpu: Q | None = None
    cpu: Q | None = None
    memory: Q | None = None
    running_jobs: int | None = None
    max_wall_time: str | None = None


class QuotaSpec(M):
    queue: str
    limits: QuotaLimits


class DatasetVersion(M):
    name: str
    path: str = ""
    manifest_digest: str | None = None


class DatasetSpec(M):
    source: str
    format: str
    versions: list[DatasetVersion]
    readers: list[str] = []
    provider: str | None = None
    deletion_policy: str = "Abandon"


class ImageSpec(M):
    reference: str | None = None
    runtime: str = "container"
    image_class: str = Field(default="standard", alias="class")
    required_labels: list[str] = []
    promoted_from: str | None = None
    provider: str | None = None


class Code(M):
    repo: str
    commit: str | None = None
    ref: str | None = None
    path: str = ""


class Resources(M):
    nodes: int = 1
    accelerators_per_node: int = 0
    cpu: Q
    memory: Q


class Checkpoint(M):
    prefix: str = ""
    interval: str
    keep_last: int = 3


class Resume(M):
    policy: str = "latest"


class Retries(M):
    limit: int = 0
    backoff: str = "1m"


class Evaluation(M):
    suite: str
    when: str = "final"


class InitFrom(M):
    job: str
    checkpoint: str = "latest"


class JobSpec(M):
    queue: str
    image: str
    datasets: list[str] = []
    code: Code | None = None
    command: list[str]
    parameters: dict[str, S | list[S]] = {}
    env: dict[str, str] = {}
    resources: Resources
    checkpoint: Checkpoint | None = None
    resume: Resume | None = None
    retries: Retries | None = None
    max_runtime: str | None = None
    priority: int | None = None
    evaluations: list[Evaluation] = []
    init_from: InitFrom | None = None


class Metric(M):
    name: str
    goal: str


class Baseline(M):
    job: str


class Gate(M):
    metric: str
    op: str
    threshold: float
    baseline: Baseline | None = None


class SuiteSpec(M):
    image: str
    command: list[str]
    datasets: list[str] = []
    metrics: list[Metric]
    gates: list[Gate] = []
    resources: Resources | None = None
    timeout: str | None = None


class Project(Doc):
    kind: Literal["Project"]
    spec: ProjectSpec


class ResourcePool(Doc):
    kind: Literal["ResourcePool"]
    spec: PoolSpec


class Queue(Doc):
    kind: Literal["Queue"]
    spec: QueueSpec


class Quota(Doc):
    kind: Literal["Quota"]
    spec: QuotaSpec


class Dataset(Doc):
    kind: Literal["Dataset"]
    spec: DatasetSpec


class Image(Doc):
    kind: Literal["Image"]
    spec: ImageSpec


class TrainingJob(Doc):
    kind: Literal["TrainingJob"]
    spec: JobSpec


class EvalSuite(Doc):
    kind: Literal["EvalSuite"]
    spec: SuiteSpec


DOCUMENT = TypeAdapter(
    Annotated[
        Project | ResourcePool | Queue | Quota | Dataset | Image | TrainingJob | EvalSuite,
        Field(discriminator="kind"),
    ]
)


class Config(M):
    api_version: str
    kind: str = "Config"
    providers: list[dict[str, Any]] = []
    state: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    environments: dict[str, dict[str, Any]] = {}
    default_environment: str | None = None
    policies: dict[str, Any] = {}
    security: dict[str, Any] = {}


def spec_files(root: str) -> list[str]:
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in files:
            if name.endswith((".yaml", ".yml")) and not name.startswith("."):
                path = os.path.join(directory, name)
                if directory == root and name == "trainform.yaml":
                    continue
                found.append(path)
    return sorted(found)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: floor_validate.py DIR", file=sys.stderr)
        return 2
    root = os.path.normpath(argv[0])
    errors = 0
    config_path = os.path.join(root, "trainform.yaml")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as handle:
            try:
                Config.model_validate(load_documents(handle.read())[0])
            except ValidationError as exc:
                errors += exc.error_count()
                print(f"{config_path}: {exc}", file=sys.stderr)
    files = spec_files(root)
    documents = 0
    for path in files:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for document in load_documents(text):
            documents += 1
            try:
                DOCUMENT.validate_python(document)
            except ValidationError as exc:
                errors += exc.error_count()
                print(f"{path}: {exc}", file=sys.stderr)
    if errors:
        print(f"{errors} error(s) in {documents} documents ({PARSER})", file=sys.stderr)
        return 1
    print(f"{documents} documents in {len(files)} files are valid ({PARSER})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
