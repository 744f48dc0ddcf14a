"""Training policies: datasets pinned to a version, and long jobs checkpointed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.context import PolicyContext, seconds
from trainform.policies.findings import Severity
from trainform.specs.models.training import split_dataset_ref
from trainform.specs.quantity import Duration


def check_datasets(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    for subject in context.of_kind("TrainingJob", "EvalSuite"):
        for index, reference in enumerate(subject.spec.get("datasets", [])):
            name, version = split_dataset_ref(reference)
            if version is None:
                yield Violation(
                    subject.address,
                    ("spec", "datasets", index),
                    f"dataset {name} is not pinned to a version: write {name}@<version>",
                    key=name,
                )


def check_checkpoints(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    threshold = seconds(params.get("maxRuntimeWithoutCheckpoint")) or 0
    queues = {q.name: q for q in context.of_kind("Queue")}
    for job in context.of_kind("TrainingJob"):
        spec = job.spec
        if spec.get("checkpoint"):
            continue
        runtime = seconds(spec.get("maxRuntime"))
        source = "its maxRuntime"
        path: tuple[str | int, ...] = ("spec", "maxRuntime")
        if runtime is None:
            queue = queues.get(spec.get("queue", ""))
            runtime = seconds(queue.spec.get("maxRuntime")) if queue else None
            source = f"queue {spec.get('queue')}'s maxRuntime"
            path = ("spec",)
        if runtime is not None and runtime <= threshold:
            continue
        limit = params.get("maxRuntimeWithoutCheckpoint")
        length = (
            "has no runtime limit"
            if runtime is None
            else f"may run {Duration(f'{runtime}s').canonical} ({source})"
        )
        yield Violation(
            job.address,
            path,
            f"job {length}, longer than {limit}, and has no checkpoint policy: set "
            "spec.checkpoint (interval, keepLast) or a shorter spec.maxRuntime",
            key="no-checkpoint",
        )


DATASET_PINNED = BuiltinPolicy(
    id="dataset-pinned",
    name="Dataset references pinned to a version",
    severity=Severity.DENY,
    kinds=("TrainingJob", "EvalSuite"),
    check=check_datasets,
    description="Every dataset a TrainingJob or EvalSuite reads is written name@version.",
)

LONG_JOB_CHECKPOINT = BuiltinPolicy(
    id="long-job-checkpoint",
    name="Long jobs have a checkpoint policy",
    severity=Severity.DENY,
    kinds=("TrainingJob", "Queue"),
    check=check_checkpoints,
    parameters={"maxRuntimeWithoutCheckpoint": "4h"},
    description="A TrainingJob whose maxRuntime (else its queue's; else unlimited) exceeds "
    "maxRuntimeWithoutCheckpoint sets spec.checkpoint.",
)
