"""Job traces: what the simulator replays, read from CSV or JSONL files.

`read_trace(path)` reads one job per row (CSV with a header) or per line (JSONL, one
object a line). Columns / keys: `id` (optional: `job-<row>` when absent), `submit`,
`project`, `queue`, `gpus`, `duration`, `priority` (optional: empty means the queue's
default priority), `limit`, `user` and `qos` (optional: Slurm's per-user limits and a job's
own QOS). Times are seconds (`90`, `12.5`) or durations (`90s`, `5m`, `2h`,
`1h30m`, `1d`). Every problem is a `TraceError` naming file:line and the field. Jobs come
back sorted by submit time (stable, so equal submit times keep file order).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainform.policies.queueing.errors import TraceError

FIELDS = (
    "id", "submit", "project", "queue", "gpus", "duration", "priority", "limit", "user", "qos"
)  # fmt: skip
REQUIRED = ("submit", "project", "queue", "gpus", "duration")
NO_PRIORITY = None

_DURATION = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?(?:w|d|h|m|s))+$")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(w|d|h|m|s)")
_UNITS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One submitted job: when, whose, where, how big, how long, how urgent.

    `priority` is None when the trace gives none: the simulator uses the queue's
    `defaultPriority` then."""

    id: str
    submit: float
    project: str
    queue: str
    gpus: int
    duration: float
    priority: int | None = None
    limit: float | None = None
    """The job's wall-time limit (seconds), as the scheduler knows it (Slurm's backfill
    plans with it); None: its duration, a perfect estimate."""
    actual_wait: float | None = None
    """Seconds from submission to first start the job really waited (traces read from
    accounting); None when unknown."""
    user: str | None = None
    """The submitting user (traces from accounting): Slurm's per-user limits count by it;
    None: unknown, per-user limits are not applied to the job."""
    qos: str | None = None
    """The QOS the job ran under (traces from accounting); None: its partition's QOS."""


def parse_seconds(text: str) -> float:
    """Seconds from `90`, `12.5`, `90s`, `5m`, `2h`, `1h30m`, `1.5h`; ValueError otherwise."""
    spelled = text.strip()
    try:
        value = float(spelled)
    except ValueError:
        if not _DURATION.match(spelled):
            raise ValueError(
                f"expected seconds or a duration such as 90s, 5m or 2h, found {text!r}"
            ) from None
        value = sum(float(n) * _UNITS[unit] for n, unit in _DURATION_PART.findall(spelled))
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"expected a finite number of seconds, found {text!r}")
    return value


def make_job(row: dict[str, Any], file: str, line: int, index: int) -> TraceJob:
    """Validate one row (values as strings or JSON scalars) into a TraceJob."""
    unknown = sorted(set(row) - set(FIELDS))
    if unknown:
        raise TraceError(file, line, unknown[0], f"unknown field; expected {', '.join(FIELDS)}")
    for name in REQUIRED:
        if row.get(name) in (None, ""):
            raise TraceError(file, line, name, "missing value")

    def text(name: str) -> str:
        value = row[name]
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise TraceError(file, line, name, f"expected a string or number, found {value!r}")
        return str(value).strip()

    def seconds(name: str, minimum_exclusive: bool) -> float:
        try:
            value = parse_seconds(text(name))
        except ValueError as error:
            raise TraceError(file, line, name, str(error)) from None
        if value < 0 or (minimum_exclusive and value == 0):
            bound = "greater than 0" if minimum_exclusive else "at least 0"
            raise TraceError(file, line, name, f"must be {bound}, found {text(name)!r}")
        return value

    def integer(name: str) -> int:
        raw = text(name)
        try:
            return int(raw)
        except ValueError:
            raise TraceError(file, line, name, f"expected a whole number, found {raw!r}") from None

    gpus = integer("gpus")
    if gpus < 1:
        raise TraceError(file, line, "gpus", f"must be at least 1, found {gpus}")
    priority = None if row.get("priority") in (None, "") else integer("priority")
    job_id = text("id") if row.get("id") not in (None, "") else f"job-{index}"
    limit = None if row.get("limit") in (None, "") else seconds("limit", minimum_exclusive=True)
    for name in ("project", "queue"):
        if not text(name):
            raise TraceError(file, line, name, "missing value")
    return TraceJob(
        id=job_id,
        submit=seconds("submit", minimum_exclusive=False),
        project=text("project"),
        queue=text("queue"),
        gpus=gpus,
        duration=seconds("duration", minimum_exclusive=True),
        priority=priority,
        limit=limit,
        user=text("user").lower() if row.get("user") not in (None, "") else None,
        qos=text("qos").lower() if row.get("qos") not in (None, "") else None,
    )


def read_trace(path: Path) -> list[TraceJob]:
    """Jobs of a CSV or JSONL trace, sorted by submit time; TraceError on any bad row.

    The format is JSONL when the file name ends in .jsonl/.ndjson/.json or its first
    non-blank character is `{`; CSV otherwise."""
    path = Path(path)
    file = str(path)
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(file, 0, "", f"cannot open: {error}") from None
    stripped = content.lstrip()
    if path.suffix in (".jsonl", ".ndjson", ".json") or stripped.startswith("{"):
        jobs = _read_jsonl(content, file)
    else:
        jobs = _read_csv(content, file)
    return sorted(jobs, key=lambda job: job.submit)


def _read_csv(content: str, file: str) -> list[TraceJob]:
    reader = csv.reader(content.splitlines())
    header: list[str] | None = None
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            for name in header:
                if name not in FIELDS:
                    raise TraceError(
                        file, line, name, f"unknown column; expected {', '.join(FIELDS)}"
                    )
            for name in REQUIRED:
                if name not in header:
                    raise TraceError(file, line, name, "missing column in the header")
            continue
        if len(row) != len(header):
            raise TraceError(
                file, line, "", f"expected {len(header)} columns as the header, found {len(row)}"
            )
        job = make_job(dict(zip(header, row, strict=True)), file, line, len(jobs) + 1)
        _add(jobs, seen, job, file, line)
    if header is None:
        raise TraceError(file, 0, "", "empty trace: expected a header line")
    return jobs


def _read_jsonl(content: str, file: str) -> list[TraceJob]:
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    for line, text in enumerate(content.splitlines(), start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as error:
            raise TraceError(file, line, "", f"invalid JSON: {error.msg}") from None
        if not isinstance(row, dict):
            raise TraceError(file, line, "", "expected a JSON object per line")
        _add(jobs, seen, make_job(row, file, line, len(jobs) + 1), file, line)
    return jobs


def _add(jobs: list[TraceJob], seen: dict[str, int], job: TraceJob, file: str, line: int) -> None:
    if job.id in seen:
        first = seen[job.id]
        raise TraceError(file, line, "id", f"duplicate job id {job.id!r} (first on line {first})")
    seen[job.id] = line
    jobs.append(job)
