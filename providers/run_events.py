"""The reading side of the run-event protocol (trainform.runtime.protocol): an attempt's
events file summed into where its time went, per phase.

The file is written by the job, so it is untrusted: at most `MAX_FILE_BYTES` are read,
a line longer than `MAX_LINE_BYTES`, a line that is not JSON, of another version, with
an unknown event or with a value out of bounds is skipped and counted, never fatal; a torn
last line (the job died mid-write) is one such line. The summary is bounded whatever the
file holds: at most `MAX_RANKS` ranks and `MAX_PHASES` phase names are kept.

Called by providers when they report an attempt (AttemptStatus.events); the planner's
breakdown (planner/run_breakdown.py) reads the summary. `summarize_events` never raises.
"""

from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainform.runtime.protocol import (
    EVENTS_SUFFIX,
    FORMAT_VERSION,
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    PHASE_NAME,
    SPAN,
    START,
    TRUNCATED,
)

MAX_RANKS = 1024
MAX_PHASES = 32
MAX_SECONDS = 10 * 365 * 86400.0
"""A longer span (or a time before 1970 or after 2100) is not believed."""
LATEST_TIME = 4102444800.0
MAX_BYTES = 2**60
MAX_COUNT = 2**40


@dataclass
class RankTotals:
    """What one process reported: seconds, spans and bytes per phase, and phases still open."""

    first: float = math.inf
    last: float = 0.0
    phases: dict[str, list[float]] = field(default_factory=dict)  # [seconds, count, bytes]
    open: dict[str, float] = field(default_factory=dict)
    step: int | None = None


def _number(value: Any, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and low <= number <= high else None


def _record(line: bytes) -> dict[str, Any] | None:
    """The line as a valid record of this version, else None."""
    if not line.strip() or len(line) > MAX_LINE_BYTES:
        return None
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("v") != FORMAT_VERSION:
        return None
    if _number(record.get("t"), 0.0, LATEST_TIME) is None:
        return None
    event = record.get("event")
    if event == TRUNCATED:
        return record
    phase = record.get("phase")
    if event not in (START, SPAN) or not isinstance(phase, str) or not PHASE_NAME.fullmatch(phase):
        return None
    if event == SPAN and _number(record.get("seconds"), 0.0, MAX_SECONDS) is None:
        return None
    for key, high in (("bytes", MAX_BYTES), ("count", MAX_COUNT), ("step", MAX_COUNT)):
        if key in record and _number(record[key], 0, high) is None:
            return None
    if "since" in record and _number(record["since"], 0.0, LATEST_TIME) is None:
        return None
    rank = record.get("rank", 0)
    if _number(rank, 0, MAX_RANKS - 1) is None or rank != int(rank):
        return None
    return record


def _add(totals: RankTotals, record: dict[str, Any]) -> bool:
    moment = float(record["t"])
    phase = record["phase"]
    if phase not in totals.phases and len(totals.phases) >= MAX_PHASES:
        return False
    if record["event"] == START:
        totals.open[phase] = moment
        totals.first = min(totals.first, moment)
        totals.phases.setdefault(phase, [0.0, 0, 0])
    else:
        seconds = float(record["seconds"])
        since = float(record.get("since", moment - seconds))
        entry = totals.phases.setdefault(phase, [0.0, 0, 0])
        entry[0] += seconds
        entry[1] += int(record.get("count", 1))
        entry[2] += int(record.get("bytes", 0))
        totals.open.pop(phase, None)
        totals.first = min(totals.first, since, moment - seconds)
    totals.last = max(totals.last, moment)
    if "step" in record:
        totals.step = int(record["step"])
    return True


def summarize_events(data: bytes) -> dict[str, Any]:
    """The summary of an events file's content (see `summary_json` for its shape)."""
    ranks: dict[int, RankTotals] = {}
    records = ignored = 0
    truncated = len(data) > MAX_FILE_BYTES
    for line in data[:MAX_FILE_BYTES].split(b"\n"):
        if not line.strip():
            continue
        record = _record(line)
        if record is None:
            ignored += 1
            continue
        if record["event"] == TRUNCATED:
            truncated, records = True, records + 1
            continue
        rank = int(record.get("rank", 0))
        if rank not in ranks and len(ranks) >= MAX_RANKS:
            ignored += 1
            continue
        if _add(ranks.setdefault(rank, RankTotals()), record):
            records += 1
        else:
            ignored += 1
    return summary_json(ranks, records, ignored, truncated)


def summary_json(
    ranks: dict[int, RankTotals], records: int, ignored: int, truncated: bool
) -> dict[str, Any]:
    """Per phase the mean seconds over the ranks that reported (each rank's time is wall
    time of the same attempt), spans and bytes summed over ranks; open phases with the
    earliest start and how many ranks hold them open; the mean of each rank's first
    moment (`firstAt`) and the latest moment (`lastAt`), unix seconds."""
    reporting = [r for r in ranks.values() if r.first < math.inf]
    phases: dict[str, dict[str, Any]] = {}
    for totals in reporting:
        for name, (seconds, count, size) in totals.phases.items():
            entry = phases.setdefault(name, {"seconds": 0.0, "count": 0, "bytes": 0})
            entry["seconds"] += seconds / len(reporting)
            entry["count"] += int(count)
            entry["bytes"] += int(size)
    opened: dict[str, dict[str, Any]] = {}
    for totals in reporting:
        for name, since in totals.open.items():
            entry = opened.setdefault(name, {"since": since, "ranks": 0})
            entry["since"] = min(entry["since"], since)
            entry["ranks"] += 1
    steps = [r.step for r in reporting if r.step is not None]
    return {
        "formatVersion": FORMAT_VERSION,
        "records": records,
        "ignored": ignored,
        "truncated": truncated,
        "ranks": len(reporting),
        "firstAt": round(sum(r.first for r in reporting) / len(reporting), 6)
        if reporting
        else None,
        "lastAt": round(max(r.last for r in reporting), 6) if reporting else None,
        "lastStep": max(steps) if steps else None,
        "phases": {
            name: {**entry, "seconds": round(entry["seconds"], 6)}
            for name, entry in sorted(phases.items())
        },
        "open": dict(sorted(opened.items())),
    }


_cache: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}


def read_events(path: Path | str) -> dict[str, Any] | None:
    """The summary of the events file at `path`, None when there is none. Reads at most
    MAX_FILE_BYTES (+1, to know it was more); the summary of an unchanged file (same size
    and modification time) is kept for the life of the process."""
    try:
        with open(path, "rb") as handle:
            facts = os.fstat(handle.fileno())
            key = (facts.st_size, facts.st_mtime_ns)
            known = _cache.get(str(path))
            if known is not None and known[0] == key:
                return copy.deepcopy(known[1])
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    summary = summarize_events(data)
    if len(_cache) > 4096:
        _cache.clear()
    _cache[str(path)] = (key, copy.deepcopy(summary))
    return summary


def events_path(log: Path | str) -> Path:
    """Where an attempt's events file is kept: beside its log, `attempt-<n>.events.jsonl`
    for `attempt-<n>.log`."""
    path = Path(log)
    return path.with_name(path.stem + EVENTS_SUFFIX)
