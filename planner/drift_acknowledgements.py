"""Drift acknowledgements: known drift that an admin has accepted for a while.

They are read from `acknowledgements.yaml` in the trusted policies folder (`--policies`,
else trainform.yaml's `policies.path`), the place waivers come from, and read the same
way: round-trip YAML for positions, a pydantic model with `extra="forbid"`, every mistake
an error naming file:line:column and field. See docs/drift.md:

    apiVersion: trainform/v1
    kind: DriftAcknowledgements
    acknowledgements:
      - address: Queue/team-*        # a glob over addresses
        finding: modified            # the finding kind
        field: spec.defaultPriority  # optional glob; every changed field must match it
        reason: raised by hand during the incident of 12 May
        expires: 2026-06-30          # inclusive

A valid acknowledgement marks the findings it covers (shown, counted apart, no effect on
the exit code). Past its expiry it covers nothing and the report says so.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from trainform.planner.drift_model import Acknowledged, DriftFinding, DriftReport
from trainform.planner.errors import PlannerError
from trainform.planner.plan_model import PlanFinding
from trainform.specs.suggest import closest_name

ACKNOWLEDGEMENTS_FILE = "acknowledgements.yaml"
FINDING_KINDS = (
    "modified",
    "missing",
    "managed-by-other",
    "orphaned",
    "data-mutated",
    "data-missing",
    "source-refused",
    "tag-moved",
    "tag-missing",
    "object-missing",
    "object-terminating",
    "object-left-over",
    "nodes-missing",
    "nodes-mixed",
    "limit-shadowed",
    "pending",
    "job-failed",
    "checkpoint-invalid",
    "evaluation-missing",
    "evaluation-failing",
)


class AcknowledgementError(PlannerError):
    """The acknowledgements file cannot be read or holds a mistake."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str = Field(min_length=1)
    finding: str = Field(min_length=1)
    field: str = ""
    reason: str = Field(min_length=1)
    expires: date


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    api_version: Literal["trainform/v1"] = Field(default="trainform/v1", alias="apiVersion")
    kind: Literal["DriftAcknowledgements"] = "DriftAcknowledgements"
    acknowledgements: list[_Entry] = Field(default_factory=list)


@dataclass(frozen=True)
class Acknowledgement:
    address: str
    finding: str
    field: str
    reason: str
    expires: date
    location: str

    def covers(self, finding: DriftFinding) -> bool:
        if finding.drift != self.finding or not fnmatch.fnmatchcase(finding.address, self.address):
            return False
        if not self.field:
            return True
        return bool(finding.fields) and all(
            fnmatch.fnmatchcase(path, self.field) for path in finding.fields
        )


def _position(node: Any, path: list[Any], at_key: bool = False) -> tuple[int, int]:
    """1-based line and column of `path` in round-trip YAML (of its key with `at_key`)."""
    line, column = 1, 1
    for number, step in enumerate(path, 1):
        if isinstance(node, CommentedMap) and step in node:
            last = at_key and number == len(path)
            line, column = node.lc.key(step) if last else node.lc.value(step)
        elif isinstance(node, CommentedSeq) and isinstance(step, int) and step < len(node):
            line, column = node.lc.item(step)
        else:
            break
        line, column = line + 1, column + 1
        node = node[step]
    return line, column


def read_acknowledgements(folder: Path | None) -> list[Acknowledgement]:
    """The acknowledgements of the trusted folder; none when it has no file."""
    if folder is None:
        return []
    file = folder / ACKNOWLEDGEMENTS_FILE
    if not file.is_file():
        return []
    display = file.as_posix()
    try:
        raw = YAML(typ="rt").load(file.read_text(encoding="utf-8"))
    except (OSError, YAMLError, UnicodeDecodeError) as exc:
        raise AcknowledgementError(f"cannot read acknowledgements {display}: {exc}") from None
    raw = CommentedMap() if raw is None else raw
    try:
        model = _File.model_validate(raw)
    except ValidationError as exc:
        problem = exc.errors()[0]
        line, column = _position(
            raw, list(problem["loc"]), at_key=problem["type"] == "extra_forbidden"
        )
        where = ".".join(str(step) for step in problem["loc"])
        raise AcknowledgementError(
            f"cannot read acknowledgements {display}:{line}:{column}: {where}: {problem['msg']}"
        ) from None
    found = []
    for index, entry in enumerate(model.acknowledgements):
        line, column = _position(raw, ["acknowledgements", index])
        if entry.finding not in FINDING_KINDS:
            fline, fcolumn = _position(raw, ["acknowledgements", index, "finding"])
            hint = closest_name(entry.finding, FINDING_KINDS)
            raise AcknowledgementError(
                f"cannot read acknowledgements {display}:{fline}:{fcolumn}: "
                f"acknowledgements.{index}.finding: unknown finding kind `{entry.finding}`"
                + (f"; did you mean `{hint}`?" if hint else f" (known: {', '.join(FINDING_KINDS)})")
            )
        found.append(
            Acknowledgement(
                entry.address,
                entry.finding,
                entry.field,
                entry.reason,
                entry.expires,
                f"{display}:{line}:{column}",
            )
        )
    return found


def acknowledge(
    report: DriftReport, acknowledgements: list[Acknowledgement], today: date
) -> DriftReport:
    """Mark the findings valid acknowledgements cover; name the expired ones."""
    valid = [a for a in acknowledgements if today <= a.expires]
    for finding in report.findings:
        match = next((a for a in valid if a.covers(finding)), None)
        if match is not None:
            finding.acknowledged = Acknowledged(
                match.reason, match.expires.isoformat(), match.location
            )
    report.expired_acknowledgements = [
        f"{a.location}: the acknowledgement of {a.finding} on {a.address}"
        + (f" ({a.field})" if a.field else "")
        + f" expired on {a.expires.isoformat()} ({a.reason}); it covers nothing now: "
        "renew it with a new date or remove it"
        for a in acknowledgements
        if today > a.expires
    ]
    return report


PLAN_KINDS = {
    "retries-exhausted": "job-failed",
    "evaluation-failed": "evaluation-failing",
    "gate-fail": "evaluation-failing",
}
"""Plan finding kinds named differently in drift."""


def acknowledge_plan_findings(
    findings: list[PlanFinding], acknowledgements: list[Acknowledgement], today: date
) -> None:
    """Mark the plan's findings that a valid acknowledgement without a `field` covers (a
    plan finding has no field; a changed field is a change of the plan, not a finding)."""
    valid = [a for a in acknowledgements if today <= a.expires and not a.field]
    for finding in findings:
        kind = PLAN_KINDS.get(finding.kind, finding.kind)
        match = next(
            (
                a
                for a in valid
                if a.finding == kind and fnmatch.fnmatchcase(finding.address, a.address)
            ),
            None,
        )
        if match is not None:
            finding.acknowledged = match.reason
            finding.message += f" (acknowledged until {match.expires.isoformat()}: {match.reason})"
