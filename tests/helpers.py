"""Helpers shared by tests: writing spec folders, small valid documents, running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRAINFORM = Path(sys.executable).parent / "trainform"
DIGEST = "sha256:" + "a" * 64

CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local}
"""

PROJECT = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: research}
spec: {owners: [ml-platform@example.com]}
"""

POOL = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: a100}
spec: {provider: local, nodes: 2, cpu: 64, memory: 512Gi}
"""

QUEUE = """\
apiVersion: trainform/v1
kind: Queue
metadata: {name: training}
spec:
  pools:
    - pool: a100
      nominalQuota: {cpu: 64, memory: 512Gi}
"""

IMAGE = """\
apiVersion: trainform/v1
kind: Image
metadata: {name: trainer}
spec: {reference: "registry.example.com/ml/trainer:v1"}
"""

DATASET = """\
apiVersion: trainform/v1
kind: Dataset
metadata: {name: corpus}
spec:
  source: s3://ml-data/corpus
  format: jsonl
  versions: [{name: v1}, {name: v2}]
"""

BASE = "---\n".join([PROJECT, POOL, QUEUE, IMAGE, DATASET])


def training_job(
    *,
    name: str = "bigram",
    image: str = "trainer",
    datasets: str = "[corpus@v1]",
    parameters: str = "{}",
    extra: str = "",
) -> str:
    """A TrainingJob of project `research` on queue `training`, with fields to vary."""
    return (
        "apiVersion: trainform/v1\n"
        "kind: TrainingJob\n"
        f"metadata: {{name: {name}, project: research}}\n"
        "spec:\n"
        "  queue: training\n"
        f"  image: {image}\n"
        f"  datasets: {datasets}\n"
        "  command: [python, train.py]\n"
        f"  parameters: {parameters}\n"
        "  resources: {cpu: 8, memory: 64Gi}\n"
        f"{extra}"
    )


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    """Write `{relative path: content}` under `root`; text is dedented."""
    root.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content), encoding="utf-8")


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed console script, colour off, and capture its output."""
    inherited = {k: v for k, v in os.environ.items() if k not in {"FORCE_COLOR", "TRAINFORM_DEBUG"}}
    environment = {**inherited, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [str(TRAINFORM), *args],
        cwd=cwd or REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
