"""The state document: what trainform last applied, per resource, with lineage and serial.

State is a versioned JSON document. `lineage` is fixed when the state is first created;
`serial` grows with every recorded change, so a saved plan can bind both and be refused
once anything was written after it. Each resource records its kind, provider instance,
normalized spec and its hash, provider outputs and status, dependencies (for deletes in
reverse order once the spec is gone) and `pending`: an operation that was started but
whose outcome was never recorded (a crash), which the next run resolves by observing.

No secret is written: a job's parameters, env and command values that look secret are
kept masked (`specs.secrets.mask_tree`, a slow keyed digest), in its spec and in its run
records; the diff compares a masked value equal to the raw value it masks.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from trainform.planner.errors import PlannerError
from trainform.specs.secrets import JOB_KINDS, mask_tree

STATE_FORMAT_VERSION = 1


class StateError(PlannerError):
    """The state cannot be read, written or locked."""


class StateCorruptError(StateError):
    def __init__(self, location: str, cause: str) -> None:
        super().__init__(
            f"cannot read state {location}: {cause}. The file was left untouched; restore a "
            "backup generation (state.json.backup.N) or fix it by hand"
        )


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """The one serialization used for hashes and digests: sorted keys, no spaces."""
    return _CANONICAL.encode(value)


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


@dataclass
class ResourceState:
    address: str
    kind: str
    providers: list[str]
    spec: dict[str, Any]
    spec_hash: str
    outputs: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    dependencies: list[str] = field(default_factory=list)
    pending: str | None = None

    def to_json(self) -> dict[str, Any]:
        sensitive = self.kind in JOB_KINDS
        return {
            "kind": self.kind,
            "providers": self.providers,
            "spec": mask_tree(self.spec) if sensitive else self.spec,
            "specHash": self.spec_hash,
            "outputs": mask_tree(self.outputs) if sensitive else self.outputs,
            "status": self.status,
            "dependencies": self.dependencies,
            "pending": self.pending,
        }

    @classmethod
    def from_json(cls, address: str, data: dict[str, Any]) -> ResourceState:
        return cls(
            address=address,
            kind=data["kind"],
            providers=list(data["providers"]),
            spec=data["spec"],
            spec_hash=data["specHash"],
            outputs=data.get("outputs", {}),
            status=data.get("status", {}),
            dependencies=list(data.get("dependencies", [])),
            pending=data.get("pending"),
        )


@dataclass
class State:
    lineage: str
    serial: int = 0
    resources: dict[str, ResourceState] = field(default_factory=dict)
    tool_version: str = ""

    @classmethod
    def new(cls) -> State:
        return cls(lineage=str(uuid.uuid4()))

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": STATE_FORMAT_VERSION,
            "lineage": self.lineage,
            "serial": self.serial,
            "toolVersion": self.tool_version,
            "resources": {
                address: self.resources[address].to_json() for address in sorted(self.resources)
            },
        }

    @classmethod
    def from_json(cls, data: Any, location: str) -> State:
        if not isinstance(data, dict):
            raise StateCorruptError(location, "expected a JSON object")
        version = data.get("formatVersion")
        if version != STATE_FORMAT_VERSION:
            raise StateCorruptError(location, f"unsupported formatVersion {version!r} (expected 1)")
        try:
            resources = {
                address: ResourceState.from_json(address, entry)
                for address, entry in data["resources"].items()
            }
            return cls(
                lineage=str(data["lineage"]),
                serial=int(data["serial"]),
                resources=resources,
                tool_version=str(data.get("toolVersion", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateCorruptError(location, f"malformed content ({exc!r})") from None

    def apply_entry(self, entry: dict[str, Any]) -> None:
        """Replay one journal entry (see planner.backends.journal) onto this state."""
        address = entry["address"]
        if entry["type"] == "intent":
            current = self.resources.get(address)
            if current is not None:
                current.pending = entry["operation"]
            else:
                self.resources[address] = ResourceState(
                    address=address,
                    kind=entry["kind"],
                    providers=list(entry["providers"]),
                    spec={},
                    spec_hash="",
                    pending=entry["operation"],
                )
        elif entry["type"] == "outcome":
            if entry.get("resource") is None:
                self.resources.pop(address, None)
            else:
                self.resources[address] = ResourceState.from_json(address, entry["resource"])
        elif entry["type"] == "abandon":
            current = self.resources.get(address)
            if current is not None and not current.spec:
                del self.resources[address]  # a create that never happened
            elif current is not None:
                current.pending = None
        self.serial += 1
