"""Checkpoints of a local run that are kept on S3: what the supervisor does with them.

The job writes checkpoints to its local checkpoint folder as always; for a run whose launch
names a `checkpoint_store` (an s3:// location, providers/local/jobs.py), the supervisor
publishes each new valid checkpoint there (files first, manifest last), fetches the one an
attempt resumes from when it is not on this disk, uploads evaluation metrics beside the
checkpoints and applies retention on S3 as well as locally. Status reads the checkpoints
from S3, which is where they must be restorable from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainform.providers.jobs import CheckpointStatus
from trainform.providers.local.checkpoints import list_checkpoints
from trainform.providers.local.runs import Attempt
from trainform.providers.objectstore.checkpoints import S3Checkpoints


def remote_store(attempt: Attempt) -> S3Checkpoints | None:
    stored: dict[str, Any] | None = attempt.launch.get("checkpoint_store")
    if not stored:
        return None
    return S3Checkpoints(stored["uri"], stored.get("connection"))


class CheckpointSync:
    """Publishes the local checkpoints of one attempt to its S3 store, once each."""

    def __init__(self, attempt: Attempt, store: S3Checkpoints) -> None:
        self.attempt = attempt
        self.store = store
        self.published: set[str] | None = None

    def fetch_resume_point(self) -> None:
        name = self.attempt.resume_from
        folder = Path(self.attempt.checkpoint_dir)
        if name and not (folder / name).is_dir():
            self.store.fetch(name, folder)

    def publish_new(self) -> list[CheckpointStatus]:
        if self.published is None:
            self.published = {c.id for c in self.store.list() if c.valid}
        done = []
        for checkpoint in list_checkpoints(Path(self.attempt.checkpoint_dir)):
            if checkpoint.valid and checkpoint.id not in self.published:
                done.append(self.store.publish(Path(checkpoint.path)))
                self.published.add(checkpoint.id)
        return done
