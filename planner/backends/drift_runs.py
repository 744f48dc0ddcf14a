"""Where drift runs are kept, beside the state: a folder (local backend) or a prefix (S3).

Each run is one small JSON object named `<time_ns>-<random>.json`, so names sort in the
order written and two concurrent runs never overwrite each other; no state lock is taken
(drift never changes the state). Retention is bounded: after an append only the newest
`keep` runs stay. A run that cannot be parsed (a torn write) is skipped on read.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainform.planner.backends.s3_objects import Bucket
from trainform.planner.state import canonical_json

DEFAULT_KEEP = 100


def _name() -> str:
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"


class DriftRuns(ABC):
    location: str

    @abstractmethod
    def append(self, run: dict[str, Any], keep: int = DEFAULT_KEEP) -> None:
        """Store one run durably, then drop the oldest beyond the newest `keep`."""

    @abstractmethod
    def read(self) -> list[dict[str, Any]]:
        """Every kept run, oldest first."""


class FolderDriftRuns(DriftRuns):
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.location = str(folder)

    def append(self, run: dict[str, Any], keep: int = DEFAULT_KEEP) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.folder / _name()
        partial = final.with_suffix(".tmp")
        with open(partial, "wb") as handle:
            handle.write(canonical_json(run).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, final)
        for old in sorted(self.folder.glob("*.json"))[:-keep]:
            old.unlink(missing_ok=True)

    def read(self) -> list[dict[str, Any]]:
        runs = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                runs.append(json.loads(path.read_bytes()))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
        return runs


class PrefixDriftRuns(DriftRuns):
    def __init__(
        self, bucket: Bucket, prefix: str, location: str, before_write: Callable[[], None]
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self.location = location
        self._before_write = before_write

    def _latest_keys(self, doing: str) -> list[str]:
        return sorted(
            listed.version.key
            for listed in self.bucket.versions(self.prefix, doing)
            if listed.latest and not listed.delete_marker
        )

    def append(self, run: dict[str, Any], keep: int = DEFAULT_KEEP) -> None:
        self._before_write()
        doing = f"cannot record a drift run beside state {self.location}"
        self.bucket.put(
            self.prefix + _name(), canonical_json(run).encode("utf-8"), doing, IfNoneMatch="*"
        )
        old = set(self._latest_keys(doing)[:-keep])
        if old:
            versions = [
                listed.version
                for listed in self.bucket.versions(self.prefix, doing)
                if listed.version.key in old
            ]
            self.bucket.delete_versions(versions, doing)

    def read(self) -> list[dict[str, Any]]:
        doing = f"cannot read the drift history of state {self.location}"
        runs = []
        for key in self._latest_keys(doing):
            found = self.bucket.get(key, doing)
            if found is None:
                continue
            try:
                runs.append(json.loads(found[0]))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
        return runs
