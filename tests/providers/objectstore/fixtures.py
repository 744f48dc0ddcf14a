"""Spec folders whose datasets live on a real S3 test server (tests/services/s3.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.services.s3 import REGION, S3Server

DATASET = """\
apiVersion: trainform/v1
kind: Dataset
metadata: {{name: {name}}}
spec:
  source: s3://{bucket}/datasets/{name}
  format: text
  readers: [{readers}]
  deletionPolicy: {policy}
  versions:
    - {{name: v1}}
"""

PROJECTS = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: research}
spec: {owners: [research@example.com]}
---
apiVersion: trainform/v1
kind: Project
metadata: {name: alignment}
spec: {owners: [alignment@example.com]}
"""


def objectstore_config(server: S3Server, bucket: str, extra: str = "", storage: str = "") -> str:
    return (
        "apiVersion: trainform/v1\n"
        "providers:\n"
        "  - {name: local, type: local, connection: {root: .trainform}}\n"
        "  - name: s3\n"
        "    type: objectstore\n"
        f"    connection: {{endpointUrl: '{server.endpoint}', region: {REGION}, "
        f"addressingStyle: path, buckets: [{bucket}]}}\n"
        f"{extra}"
        "state: {backend: local, path: .trainform/state.json}\n"
        f"{storage}"
    )


def upload_version(
    server: S3Server, bucket: str, prefix: str, files: dict[str, bytes]
) -> dict[str, Any]:
    """Put `files` under `prefix/`; returns {relative path: ETag}."""
    client = server.client()
    etags = {}
    for relative, body in files.items():
        answer = client.put_object(Bucket=bucket, Key=f"{prefix}/{relative}", Body=body)
        etags[relative] = answer["ETag"].strip('"')
    return etags


def dataset_folder(
    root: Path,
    server: S3Server,
    bucket: str,
    names: tuple[str, ...] = ("corpus",),
    policy: str = "Abandon",
) -> Path:
    """A spec folder with datasets on `bucket`, each with a version v1 of three objects."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "trainform.yaml").write_text(objectstore_config(server, bucket), encoding="utf-8")
    (root / "projects.yaml").write_text(PROJECTS, encoding="utf-8")
    documents = []
    for name in names:
        documents.append(
            DATASET.format(name=name, bucket=bucket, readers="research", policy=policy)
        )
        upload_version(
            server,
            bucket,
            f"datasets/{name}/v1",
            {f"part-{i:03}.txt": f"{name} record {i}\n".encode() for i in range(3)},
        )
    (root / "datasets.yaml").write_text("---\n".join(documents), encoding="utf-8")
    return root
