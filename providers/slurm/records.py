"""EvalSuite records of the Slurm provider: one JSON file per suite under the job root.

Slurm has no object for an evaluation suite; the suite's document is what its evaluation
jobs run, so the provider keeps it as `<job_root>/suites/<address>.json` with the manager
that wrote it. Read and written by SlurmProvider only.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from trainform.providers.errors import PermanentProviderError


class SuiteRecords:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, address: str) -> Path:
        return self.folder / (address.replace("/", "__") + ".json")

    def _load(self, address: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path(address).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def uid(self, address: str) -> str | None:
        """The id given at the first write, kept by later ones (the record's identity)."""
        data = self._load(address)
        return None if data is None else data.get("uid")

    def read(self, address: str, manager: str) -> dict[str, Any] | None:
        data = self._load(address)
        if data is None or data.get("manager") != manager:
            return None
        document: dict[str, Any] = data["document"]
        return document

    def write(self, address: str, manager: str, document: dict[str, Any]) -> None:
        data = self._load(address)
        if data is not None and data.get("manager") != manager:
            raise PermanentProviderError(f"{address} is managed by {data.get('manager')}")
        uid = data["uid"] if data is not None and "uid" in data else uuid.uuid4().hex
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.path(address)
        temporary = target.with_suffix(".tmp")
        record = {"manager": manager, "address": address, "uid": uid, "document": document}
        temporary.write_text(json.dumps(record), encoding="utf-8")
        os.replace(temporary, target)

    def delete(self, address: str, manager: str) -> None:
        data = self._load(address)
        if data is None:
            return
        if data.get("manager") != manager:
            raise PermanentProviderError(f"{address} is managed by {data.get('manager')}")
        self.path(address).unlink(missing_ok=True)

    def owned(self, manager: str) -> list[tuple[str, str]]:
        found = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if data.get("manager") == manager:
                found.append((str(data["address"]), "EvalSuite"))
        return found
