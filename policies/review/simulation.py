"""The same job trace simulated under the base and the head platform, side by side.

`read_jobs` reads a trace from a file (CSV or JSONL, policies.queueing.read_trace) or from
provider accounting (`sacct --json` for Slurm, when the command is installed).
`compare_simulations` runs policies.queueing.simulate under both platforms and pairs the
wait statistics per queue and per project; a key present on one side only is kept with
`None` on the other.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policies.review.errors import TraceError
from specs import SpecSet

if TYPE_CHECKING:
    from policies.queueing import SimulationResult, TraceJob, WaitStats

TRACE_SOURCES = ("slurm",)
SACCT_ARGS = ("--json", "--allusers", "--starttime", "now-14days", "--endtime", "now")


def read_jobs(path: Path | None, source: str | None) -> list[TraceJob]:
    """Jobs of the trace file `path`, or of the accounting of `source` (`slurm`)."""
    from policies.queueing import read_sacct, read_trace
    from policies.queueing.errors import QueueingError

    if path is not None:
        try:
            return list(read_trace(path))
        except OSError as exc:
            raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from None
        except (QueueingError, ValueError) as exc:
            raise TraceError(str(exc)) from None
    if source != "slurm":
        raise TraceError(f"cannot read a trace from {source!r}: known sources: slurm")
    sacct = shutil.which("sacct")
    if sacct is None:
        raise TraceError(
            "cannot read a trace from Slurm accounting: `sacct` is not on PATH "
            "(run the review where Slurm's client commands are installed, or pass --trace FILE)"
        )
    result = subprocess.run(
        [sacct, *SACCT_ARGS], capture_output=True, text=True, check=False, timeout=300
    )
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()
        raise TraceError(
            f"cannot read a trace from Slurm accounting: sacct exited {result.returncode}"
            + (f": {detail[-1]}" if detail else "")
        )
    try:
        return list(read_sacct(result.stdout))
    except (QueueingError, ValueError) as exc:
        raise TraceError(f"cannot read a trace from Slurm accounting: {exc}") from None


@dataclass(frozen=True, slots=True)
class WaitRow:
    """Wait statistics of one queue or project under base and head."""

    key: str
    before: WaitStats | None
    after: WaitStats | None


@dataclass(frozen=True, slots=True)
class SimulationComparison:
    trace: str
    jobs: int
    base: SimulationResult
    head: SimulationResult
    queues: tuple[WaitRow, ...]
    projects: tuple[WaitRow, ...]


def _pair(before: dict[str, Any], after: dict[str, Any]) -> tuple[WaitRow, ...]:
    keys = sorted(before.keys() | after.keys())
    return tuple(WaitRow(key, before.get(key), after.get(key)) for key in keys)


def compare_simulations(
    base: SpecSet, head: SpecSet, jobs: Sequence[TraceJob], trace: str
) -> SimulationComparison:
    from policies.queueing import platform_from_specs, simulate

    before = simulate(platform_from_specs(base), list(jobs))
    after = simulate(platform_from_specs(head), list(jobs))
    return SimulationComparison(
        trace,
        len(jobs),
        before,
        after,
        _pair(dict(before.per_queue), dict(after.per_queue)),
        _pair(dict(before.per_project), dict(after.per_project)),
    )


def stats_json(stats: WaitStats | None) -> dict[str, Any] | None:
    return None if stats is None else stats.to_json()


def comparison_json(comparison: SimulationComparison) -> dict[str, Any]:
    def rows(items: tuple[WaitRow, ...]) -> dict[str, Any]:
        return {
            row.key: {"base": stats_json(row.before), "head": stats_json(row.after)}
            for row in items
        }

    return {
        "trace": comparison.trace,
        "jobs": comparison.jobs,
        "queues": rows(comparison.queues),
        "projects": rows(comparison.projects),
        "base": comparison.base.to_json(include_jobs=False),
        "head": comparison.head.to_json(include_jobs=False),
    }
