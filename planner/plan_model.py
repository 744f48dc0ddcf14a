"""The plan: ordered resource changes with reasons, bound to the state and specs it came from.

A plan is data. Renderers (text, JSON, Markdown) read it; `apply` executes it. A saved
plan carries the lineage and serial of the state it was computed against, the digest of
the specs and of the lock file, the tool version, the provider configuration, and a
checksum over all of it, so a stale or altered plan is refused.

Secrets are masked where the plan is shown: `ResourceChange.shown()` is the change with
every secret-looking job parameter, env value and command argument replaced by
`(sensitive:<digest>)` (before, after, field changes, reasons, launches), and `to_json()`
is that masked form, saved plans included: `apply FILE` puts the real values back from
the spec folder once it has proven it is the one planned (planner.saved_plans).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainform.planner.diff import FieldChange
from trainform.planner.errors import PlannerError
from trainform.planner.plan_signing import signature_problem, signed
from trainform.planner.state import canonical_json
from trainform.specs.secrets import JOB_KINDS, mask, mask_document, mask_tree, sensitive_values

PLAN_FORMAT_VERSION = 1


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"
    RESUME = "resume"
    EVALUATE = "evaluate"
    NOOP = "no-op"

    @property
    def symbol(self) -> str:
        return {
            "create": "+",
            "update": "~",
            "replace": "-/+",
            "delete": "-",
            "resume": ">",
            "evaluate": "?",
            "no-op": " ",
        }[self.value]


class PlanFileError(PlannerError):
    """A saved plan cannot be used: unreadable, altered, or stale."""


class StalePlanError(PlanFileError):
    """The state changed since the plan was made."""


@dataclass
class ResourceChange:
    address: str
    kind: str
    action: Action
    providers: list[str]
    reasons: list[str] = field(default_factory=list)
    changes: list[FieldChange] = field(default_factory=list)
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    after_hash: str = ""
    dependencies: list[str] = field(default_factory=list)
    previous_dependencies: list[str] = field(default_factory=list)
    replace_order: str = "delete-first"
    data_kept: bool = False
    known_after_apply: list[str] = field(default_factory=list)
    location: str = ""
    job: dict[str, Any] = field(default_factory=dict)
    applied: dict[str, Any] | None = None
    """The spec last applied, when `before` is the live object because it drifted."""

    def to_json(self, reveal: bool = False) -> dict[str, Any]:
        """The change as JSON: secrets masked, unless `reveal` (a plan file for apply)."""
        data = (self if reveal else self.shown())._json()
        if self.applied is not None:
            data["applied"] = self.applied if reveal else mask_document(self.applied)
        return data

    def shown(self) -> ResourceChange:
        """This change as it may be displayed: secret-looking job values masked."""
        if self.kind not in JOB_KINDS:
            return self
        raw = sensitive_values([self.before, self.after, self.job, self.applied])
        if not raw:
            return self
        masks = {value: mask(value) for value in raw}  # longest first, for `in_text`

        def in_text(text: str) -> str:
            for value, shown in masks.items():
                text = text.replace(value, shown)
            return text

        return dataclasses.replace(
            self,
            reasons=[in_text(reason) for reason in self.reasons],
            changes=[_shown_field(change, masks) for change in self.changes],
            before=mask_document(self.before),
            after=mask_document(self.after),
            job=mask_tree(self.job),
            applied=mask_document(self.applied),
        )

    def _json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "kind": self.kind,
            "action": self.action.value,
            "providers": self.providers,
            "reasons": self.reasons,
            "changes": [change.to_json() for change in self.changes],
            "before": self.before,
            "after": self.after,
            "afterHash": self.after_hash,
            "dependencies": self.dependencies,
            "previousDependencies": self.previous_dependencies,
            "replaceOrder": self.replace_order,
            "dataKept": self.data_kept,
            "knownAfterApply": self.known_after_apply,
            "location": self.location,
            "job": self.job,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResourceChange:
        return cls(
            address=data["address"],
            kind=data["kind"],
            action=Action(data["action"]),
            providers=list(data["providers"]),
            reasons=list(data["reasons"]),
            changes=[
                FieldChange(c["path"], c["before"], c["after"], c["forcesReplacement"])
                for c in data["changes"]
            ],
            before=data["before"],
            after=data["after"],
            after_hash=data["afterHash"],
            dependencies=list(data["dependencies"]),
            previous_dependencies=list(data["previousDependencies"]),
            replace_order=data["replaceOrder"],
            data_kept=data["dataKept"],
            known_after_apply=list(data["knownAfterApply"]),
            location=data["location"],
            job=dict(data.get("job", {})),
            applied=data.get("applied"),
        )


def _shown_field(change: FieldChange, masks: dict[str, str]) -> FieldChange:
    """A field change whose sides are masked where they hold a masked value."""

    def shown(value: Any) -> Any:
        if isinstance(value, str):
            return masks.get(value, value)
        if isinstance(value, list):
            return [shown(item) for item in value]
        if isinstance(value, dict):
            return {key: shown(item) for key, item in value.items()}
        return value

    before, after = shown(change.before), shown(change.after)
    if before is change.before and after is change.after:
        return change
    return FieldChange(change.path, before, after, change.forces_replacement)


PLAN_ONLY_FINDINGS = frozenset(
    {
        "not-reconciled",
        "not-submitted",
        "retry-backoff",
        "running-work",
        "provider-warning",
        "limit-shadowed",
    }
)
"""Findings about the plan itself, and advice about the live setup that drift shows as a
warning, never as drift (`limit-shadowed`). Every other finding is something drift reports too (an
orphan, a failed job, mutated data, a moved tag, a broken checkpoint...): unless it is
acknowledged it makes `plan --detailed-exitcode` exit 2, as it makes drift exit 2."""


@dataclass
class PlanFinding:
    """Something the plan found that is not a change: data mutated, observe warnings."""

    address: str
    kind: str
    severity: str
    message: str
    acknowledged: str = ""
    """The reason of the valid drift acknowledgement that covers it (docs/drift.md)."""

    @property
    def is_drift(self) -> bool:
        return self.kind not in PLAN_ONLY_FINDINGS and not self.acknowledged

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
        } | ({"acknowledged": self.acknowledged} if self.acknowledged else {})


@dataclass
class Plan:
    tool_version: str
    lineage: str | None
    serial: int
    spec_digest: str
    lock_digest: str
    config: dict[str, Any]
    refresh: bool
    destroy: bool = False
    targets: list[str] = field(default_factory=list)
    changes: list[ResourceChange] = field(default_factory=list)
    findings: list[PlanFinding] = field(default_factory=list)
    environment: str | None = None
    state_location: str = ""
    spec_folder: str = ""
    pins: dict[str, Any] = field(default_factory=dict)
    state_binding: str = ""
    """The state location relative to the spec folder (`./...`) when it lies inside it, as a
    saved plan binds it; never rendered."""
    variables: dict[str, str] = field(default_factory=dict)
    """The -var values a saved plan was made with (secret-looking ones redacted,
    planner.variables), replayed by `apply FILE`; empty unless the plan was saved."""

    @property
    def actionable(self) -> list[ResourceChange]:
        return [c for c in self.changes if c.action is not Action.NOOP]

    @property
    def has_changes(self) -> bool:
        return bool(self.actionable)

    @property
    def drift_findings(self) -> list[PlanFinding]:
        """Findings that drift reports too, not acknowledged (exit 2 with --detailed-exitcode)."""
        return [finding for finding in self.findings if finding.is_drift]

    def summary(self) -> dict[str, int]:
        counts = {action.value: 0 for action in Action}
        for change in self.changes:
            counts[change.action.value] += 1
        return counts

    def to_json(self, reveal: bool = False) -> dict[str, Any]:
        """The plan as JSON; secrets masked unless `reveal` (only for a plan file)."""
        body = {
            "formatVersion": PLAN_FORMAT_VERSION,
            "toolVersion": self.tool_version,
            "lineage": self.lineage,
            "serial": self.serial,
            "specDigest": self.spec_digest,
            "lockDigest": self.lock_digest,
            "refresh": self.refresh,
            "destroy": self.destroy,
            "targets": self.targets,
            "summary": self.summary(),
            "changes": [change.to_json(reveal) for change in self.changes],
            "findings": [finding.to_json() for finding in self.findings],
            "config": self.config,
            "environment": self.environment,
            "specFolder": self.spec_folder,
            "stateLocation": self.state_location,
            "pins": self.pins,
        }
        if self.variables:
            body["variables"] = self.variables
        return body

    def to_file_bytes(self, spec_root: Path) -> bytes:
        body = signed(
            {
                **self.to_json(),
                "specRoot": str(spec_root),
                "stateLocation": self.state_location,
            }
        )
        checksum = "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()
        return json.dumps({**body, "checksum": checksum}, indent=2).encode() + b"\n"

    @classmethod
    def from_file(cls, path: str) -> tuple[Plan, Path]:
        """The saved plan at `path` and the spec folder it was made from."""
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise PlanFileError(f"cannot read plan {path}: {exc.strerror}") from None
        return cls.from_file_bytes(raw, path)

    @classmethod
    def from_file_bytes(cls, raw: bytes, location: str) -> tuple[Plan, Path]:
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PlanFileError(f"cannot read plan {location}: not a plan file ({exc})") from None
        if not isinstance(data, dict) or data.get("formatVersion") != PLAN_FORMAT_VERSION:
            raise PlanFileError(f"cannot read plan {location}: unsupported plan format")
        checksum = data.pop("checksum", None)
        expected = "sha256:" + hashlib.sha256(canonical_json(data).encode()).hexdigest()
        if checksum != expected:
            raise PlanFileError(
                f"cannot apply plan {location}: its checksum does not match its content; "
                "the file was altered after `trainform plan -out` wrote it. Create a new plan"
            )
        problem = signature_problem(data)
        if problem:
            raise PlanFileError(f"cannot apply plan {location}: {problem}")
        try:
            plan = cls(
                tool_version=data["toolVersion"],
                lineage=data["lineage"],
                serial=int(data["serial"]),
                spec_digest=data["specDigest"],
                lock_digest=data["lockDigest"],
                config=data["config"],
                refresh=bool(data["refresh"]),
                destroy=bool(data["destroy"]),
                targets=list(data["targets"]),
                changes=[ResourceChange.from_json(c) for c in data["changes"]],
                findings=[PlanFinding(**f) for f in data["findings"]],
                environment=data.get("environment"),
                state_location=str(data.get("stateLocation") or ""),
                spec_folder=str(data.get("specFolder") or ""),
                pins=dict(data.get("pins") or {}),
                state_binding=str(data.get("stateBinding") or ""),
                variables={str(k): str(v) for k, v in (data.get("variables") or {}).items()},
            )
            return plan, bound_spec_root(data, location)
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanFileError(f"cannot read plan {location}: malformed ({exc!r})") from None


def bound_spec_root(data: dict[str, Any], location: str) -> Path:
    """The spec folder a saved plan applies to: the one at the relative path it was made
    for, under the directory apply runs in (so a plan copied into another checkout applies
    to that checkout, whose state must then be the planned one); the absolute folder only
    for a plan made of a folder outside the directory plan ran in."""
    relative = data.get("specRootRelative")
    if not isinstance(relative, str):
        return Path(data["specRoot"])
    root = (Path.cwd() / relative).resolve()
    if not (root / "trainform.yaml").is_file():
        raise PlanFileError(
            f"cannot apply plan {location}: it was made for the spec folder {relative} "
            f"(relative to the directory plan ran in), and {root} is not one; run apply "
            "from the same directory of the checkout"
        )
    return root
