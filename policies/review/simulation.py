"""The same job trace simulated under the base and the head platform, side by side.

`read_jobs` reads a trace from a file (CSV or JSONL, policies.queueing.read_trace) or from
provider accounting: `sacct --json --duplicates` over a window (`--since/--until`), run as
the slurm provider instance of the base's trainform.yaml runs Slurm commands (its bin_dir,
SLURM_CONF and cluster), requeued runs folded into one job, priorities left to the specs.
`compare_simulations` simulates both platforms (`simulate_specs`: Slurm queues in the Slurm
model, the others in the Kueue model) and pairs the wait statistics per queue and per
project (a key on one side only is kept with `None` on the other); with a trace from
accounting it also keeps the waits the jobs really had.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainform.policies.review.errors import TraceError
from trainform.specs import SpecSet

if TYPE_CHECKING:
    from trainform.policies.queueing import SimulationResult, TraceJob, WaitStats
    from trainform.policies.review.slurm_settings import SchedulerSettings
    from trainform.specs.models.config import RootConfig

TRACE_SOURCES = ("slurm",)
_WHEN = re.compile(
    r"^(now(-[0-9]+(days|hours|minutes|seconds))?"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2})?)?)$"
)


@dataclass(frozen=True, slots=True)
class AccountingWindow:
    """Which accounting `--trace-from` reads: the source (`slurm` or `slurm:INSTANCE`) and
    the window, in sacct's time syntax (`now-14days`, `2026-01-31`, `2026-01-31T08:00`)."""

    source: str
    since: str = "now-14days"
    until: str = "now"


def read_jobs(
    path: Path | None, window: AccountingWindow | None, config: RootConfig | None = None
) -> list[TraceJob]:
    """Jobs of the trace file `path`, or of the accounting `window` names, read with the
    provider instance of `config` (the base side's trainform.yaml)."""
    from trainform.policies.queueing import read_trace
    from trainform.policies.queueing.errors import QueueingError

    if path is not None:
        try:
            return list(read_trace(path))
        except OSError as exc:
            raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from None
        except (QueueingError, ValueError) as exc:
            raise TraceError(str(exc)) from None
    if window is None:
        raise TraceError("cannot read a trace: give --trace FILE or --trace-from slurm")
    return _read_slurm(window, config)


def slurm_instance(source: str, config: RootConfig | None) -> Any:
    kind, _, name = source.partition(":")
    if kind not in TRACE_SOURCES:
        raise TraceError(f"cannot read a trace from {source!r}: known sources: slurm")
    instances = [p for p in (config.providers if config else []) if p.type == "slurm"]
    if name:
        chosen = [p for p in instances if p.name == name]
        if not chosen:
            known = ", ".join(p.name for p in instances) or "none"
            raise TraceError(
                f"cannot read a trace from {source}: trainform.yaml has no slurm provider "
                f"instance {name!r} (slurm instances: {known})"
            )
        return chosen[0]
    if len(instances) != 1:
        known = ", ".join(p.name for p in instances) or "none"
        raise TraceError(
            f"cannot read a trace from Slurm accounting: trainform.yaml declares "
            f"{len(instances)} slurm provider instances ({known}); name one with "
            "--trace-from slurm:INSTANCE"
        )
    return instances[0]


def _read_slurm(window: AccountingWindow, config: RootConfig | None) -> list[TraceJob]:
    """`sacct --json` of the window, run as the provider instance runs Slurm commands
    (its bin_dir and SLURM_CONF, its cluster), requeued runs folded."""
    from trainform.policies.queueing import read_sacct
    from trainform.policies.queueing.errors import QueueingError
    from trainform.providers.errors import ProviderError
    from trainform.providers.slurm.commands import SlurmCommands

    for option, value in (("--since", window.since), ("--until", window.until)):
        if not _WHEN.match(value):
            raise TraceError(
                f"cannot read {option} {value!r}: expected now, now-<N>days|hours|minutes|"
                "seconds, YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS]"
            )
    instance = slurm_instance(window.source, config)
    connection = instance.connection
    argv = ["sacct", "--json", "--allusers", "--duplicates"]
    argv += ["--starttime", window.since, "--endtime", window.until]
    if connection.cluster:
        argv += ["--clusters", connection.cluster]
    commands = SlurmCommands(connection.bin_dir, connection.conf, timeout=300)
    try:
        result = commands.run(argv, check=False, retry=False)
    except ProviderError as exc:
        raise TraceError(f"cannot read a trace from Slurm accounting: {exc}") from None
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise TraceError(
            f"cannot read a trace from Slurm accounting ({instance.name}): sacct exited "
            f"{result.returncode}" + (f": {detail[-1]}" if detail else "")
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
    actual_queues: dict[str, WaitStats] = field(default_factory=dict)
    """Waits the jobs really had (a trace from accounting), per queue and per project:
    beside the simulated base they show the simulator's error on this history."""
    actual_projects: dict[str, WaitStats] = field(default_factory=dict)
    scheduler: SchedulerSettings | None = None
    """The Slurm settings the Slurm model ran with, when read from the cluster."""


def _pair(before: dict[str, Any], after: dict[str, Any]) -> tuple[WaitRow, ...]:
    keys = sorted(before.keys() | after.keys())
    return tuple(WaitRow(key, before.get(key), after.get(key)) for key in keys)


def compare_simulations(
    base: SpecSet,
    head: SpecSet,
    jobs: Sequence[TraceJob],
    trace: str,
    scheduler: SchedulerSettings | None = None,
) -> SimulationComparison:
    before = simulate_specs(base, jobs, scheduler)
    after = simulate_specs(head, jobs, scheduler)
    return SimulationComparison(
        trace,
        len(jobs),
        before,
        after,
        _pair(dict(before.per_queue), dict(after.per_queue)),
        _pair(dict(before.per_project), dict(after.per_project)),
        _actual(jobs, lambda job: job.queue),
        _actual(jobs, lambda job: job.project),
        scheduler,
    )


def _actual(jobs: Sequence[TraceJob], key: Any) -> dict[str, WaitStats]:
    from trainform.policies.queueing import WaitStats

    waits: dict[str, list[float]] = {}
    for job in jobs:
        if job.actual_wait is not None:
            waits.setdefault(key(job), []).append(job.actual_wait)
    return {name: WaitStats.of(values) for name, values in sorted(waits.items())}


def simulate_specs(
    specs: SpecSet, jobs: Sequence[TraceJob], scheduler: SchedulerSettings | None = None
) -> SimulationResult:
    """The trace under the platform of `specs`: queues on Slurm pools in the Slurm model
    (with the cluster's `scheduler` settings when known, else Slurm's defaults), the others
    in the Kueue model (docs/simulation.md), merged in trace order."""
    from trainform.policies.queueing import platform_from_specs, simulate
    from trainform.policies.queueing.result import summarise
    from trainform.policies.queueing.slurm_sim import simulate_slurm
    from trainform.policies.queueing.slurm_specs import (
        slurm_platform_from_specs,
        slurm_queue_names,
    )

    platform = platform_from_specs(specs)
    slurm = slurm_queue_names(specs)
    if not slurm:
        return simulate(platform, list(jobs))
    kueue = simulate(platform, [job for job in jobs if job.queue not in slurm])
    model = slurm_platform_from_specs(
        specs,
        scheduler.weights if scheduler else None,
        scheduler.preemption if scheduler else None,
    )
    if scheduler is not None:
        scheduler.apply(model)
    scheduled = simulate_slurm(model, [job for job in jobs if job.queue in slurm])
    order = {job.id: index for index, job in enumerate(jobs)}
    outcomes = sorted(kueue.jobs + scheduled.jobs, key=lambda outcome: order[outcome.id])
    return summarise(
        outcomes,
        {**kueue.reasons, **scheduled.reasons},
        dict(platform.pools),
        {**kueue.held, **scheduled.held},
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
        "scheduler": comparison.scheduler.to_json() if comparison.scheduler else None,
        "actual": {
            "queues": {k: v.to_json() for k, v in comparison.actual_queues.items()},
            "projects": {k: v.to_json() for k, v in comparison.actual_projects.items()},
        },
        "base": comparison.base.to_json(include_jobs=False),
        "head": comparison.head.to_json(include_jobs=False),
    }
