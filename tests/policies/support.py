"""Spec folders for policy tests: a small valid platform, and evaluation with given policies."""

from __future__ import annotations

import textwrap
from datetime import date
from pathlib import Path

from trainform.policies.engine import PolicyReport, evaluate_policies
from trainform.policies.findings import PolicyFinding
from trainform.policies.trusted import TrustedPolicies, load_trusted
from trainform.specs import load_specs

from tests.helpers import write_tree

TODAY = date(2026, 6, 1)

CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: k8s, type: kubernetes}
  - {name: registry, type: registry, connection: {url: "https://registry.example.com"}}
"""

POOL = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: h100}
spec:
  provider: k8s
  nodes: 2
  cpu: 64
  memory: 512Gi
  accelerator: {type: nvidia-h100, count: 8}
"""


def queue(name: str, gpu: int, extra: str = "", cohort: str = "") -> str:
    cohort_line = f"  cohort: {cohort}\n" if cohort else ""
    return (
        f"apiVersion: trainform/v1\nkind: Queue\nmetadata: {{name: {name}}}\nspec:\n"
        f"{cohort_line}  pools:\n    - pool: h100\n      nominalQuota: {{gpu: {gpu}}}\n{extra}"
    )


PROJECT = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: team-a}
spec: {owners: [a@example.com], specPaths: ["teams/team-a/**"]}
"""

PINNED = "registry.example.com/ml/trainer:v1@sha256:" + "a" * 64


def image(reference: str = PINNED, name: str = "trainer") -> str:
    return (
        f"apiVersion: trainform/v1\nkind: Image\nmetadata: {{name: {name}}}\n"
        f'spec: {{reference: "{reference}"}}\n'
    )


def job(spec_extra: str = "", datasets: str = "[corpus@v1]", project: str = "team-a") -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: trainform/v1
        kind: TrainingJob
        metadata: {{name: train, project: {project}}}
        spec:
          queue: team-a
          image: trainer
          datasets: {datasets}
          command: [python, train.py]
          resources: {{nodes: 1, acceleratorsPerNode: 8, cpu: 8, memory: 64Gi}}
        """
    ) + textwrap.indent(spec_extra, "  ")


DATASET = """\
apiVersion: trainform/v1
kind: Dataset
metadata: {name: corpus}
spec: {source: s3://data/corpus, format: jsonl, versions: [{name: v1}]}
"""


def folder(root: Path, files: dict[str, str]) -> Path:
    write_tree(root, {"trainform.yaml": CONFIG, **files})
    return root


def evaluate(
    root: Path, trusted: TrustedPolicies | None = None, plan: object = None
) -> PolicyReport:
    specs = load_specs(root)
    policies = trusted if trusted is not None else load_trusted(None, specs.config, specs.root)
    return evaluate_policies(specs, plan, policies, today=TODAY)  # type: ignore[arg-type]


def of(report: PolicyReport, policy: str) -> list[PolicyFinding]:
    return [finding for finding in report.findings if finding.policy == policy]
