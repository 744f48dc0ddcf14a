"""Benchmark: the queueing simulation of `trainform review` on a 100,000-job trace.

A seeded RNG generates a trace of N jobs (default 10,000 and 100,000) on a platform of
two GPU pools (h100: 256, a100: 512) and ten queues: eight in the `training` cohort with
borrowing and lending limits and every preemption policy (withinQueue, reclaimWithinCohort,
borrowWithinCohort with a threshold), two outside it; BestEffortFIFO and StrictFIFO;
4 projects a queue, half of them with Quota caps (64 GPUs, 12 running jobs). Each queue
gets work in proportion to its nominal GPUs. Sizes 1-64 GPUs (mostly
1-8), log-normal durations (median 40 min, up to 3 days), Poisson arrivals at 90% of the
capacity in GPU-seconds, so queues build backlogs and borrowing and preemption happen.

Timed in-process, interleaved, median of `--repeat` rounds after one untimed warm-up:

- **simulate**: `policies.queueing.simulate(platform, jobs)`, the full model;
- **floor**: a naive FIFO simulation of the same jobs on one pool of the total capacity
  with one queue (a heap of completions, no quotas, cohorts, priorities or preemption):
  the least work any event-driven simulation of these jobs does in Python.

Reported: seconds, jobs per second, simulate / floor, and the scaling from the smallest
to the largest N (1.0 per job is linear). Raw numbers go to bench/out/simulate.json. A
benchmark, not a test: it asserts nothing about time.

    .venv/bin/python bench/bench_simulate.py [--sizes 10000 100000] [--repeat 3]
    .venv/bin/python bench/bench_simulate.py --smoke --out DIR   # CI: 2,000 jobs, one round

`--smoke` runs the same code on 2,000 jobs once and checks the outcome (every job either
finishes or has a reason, and the time pending per project and queue is all attributed to
causes), never the time: tests/test_bench_smoke.py runs it.
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from trainform.policies.queueing import (  # noqa: E402
    PlatformModel,
    PoolQuota,
    ProjectQuota,
    QueueModel,
    TraceJob,
    simulate,
)

from bench.bench_validate import git_revision  # noqa: E402

TARGET_SECONDS = 30.0  # issue 8: 100,000 jobs in under 30 s on this machine
TARGET_SIZE = 100_000
LOAD = 0.9
PROJECTS_PER_QUEUE = 4
SIZES = [(1, 30), (2, 15), (4, 15), (8, 25), (16, 8), (32, 5), (64, 2)]


def bench_platform() -> PlatformModel:
    queues = [
        QueueModel(
            "pretrain",
            (PoolQuota("h100", 128, 64, 64), PoolQuota("a100", 128, 128, 64)),
            cohort="training",
            default_priority=1000,
            within_queue="LowerPriority",
            reclaim_within_cohort="Any",
            borrow_within_cohort="LowerPriority",
            borrow_max_priority=500,
            fair_share_weight=2.0,
        ),
        QueueModel(
            "finetune",
            (PoolQuota("a100", 128, 64, None), PoolQuota("h100", 32, 0, None)),
            cohort="training",
            default_priority=500,
            within_queue="LowerOrNewerEqualPriority",
            reclaim_within_cohort="LowerPriority",
        ),
        QueueModel(
            "eval",
            (PoolQuota("a100", 48, 48, 32),),
            cohort="training",
            default_priority=200,
            reclaim_within_cohort="LowerPriority",
            queueing_strategy="StrictFIFO",
            fair_share_weight=0.5,
        ),
        *(
            QueueModel(
                f"team-{letter}",
                (PoolQuota("a100", 32, 32, None), PoolQuota("h100", 16, 16, None)),
                cohort="training",
                default_priority=300,
                reclaim_within_cohort="Any",
            )
            for letter in "abcde"
        ),
        QueueModel("batch", (PoolQuota("a100", 48),), default_priority=100),
        QueueModel(
            "debug", (PoolQuota("h100", 32),), default_priority=800, within_queue="LowerPriority"
        ),
    ]
    quotas = {}
    for index, queue in enumerate(queues):
        for member in range(0, PROJECTS_PER_QUEUE, 2):
            project = f"project-{index * PROJECTS_PER_QUEUE + member:02d}"
            quotas[(project, queue.name)] = ProjectQuota(
                project, queue.name, gpus=64, running_jobs=12
            )
    return PlatformModel(
        pools={"h100": 256, "a100": 512},
        queues={queue.name: queue for queue in queues},
        quotas=quotas,
    )


def bench_trace(n: int, seed: int = 7) -> list[TraceJob]:
    rng = random.Random(seed)
    model = bench_platform()
    names = sorted(model.queues)
    # Each queue gets work in proportion to its nominal GPUs, from its own 4 projects.
    shares = [sum(pool.nominal for pool in model.queues[name].pools) for name in names]
    capacity = sum(model.pools.values())
    sizes, weights = zip(*SIZES, strict=True)
    median, sigma, longest = 2400.0, 1.3, 3 * 86400.0
    mean_duration = median * math.exp(sigma**2 / 2)
    mean_gpus = sum(s * w for s, w in SIZES) / sum(weights)
    rate = LOAD * capacity / (mean_gpus * mean_duration)
    jobs, now = [], 0.0
    for index in range(n):
        now += rng.expovariate(rate)
        home = rng.choices(range(len(names)), shares)[0]
        project = home * PROJECTS_PER_QUEUE + rng.randrange(PROJECTS_PER_QUEUE)
        queue = names[home]
        jobs.append(
            TraceJob(
                id=f"job-{index:06d}",
                submit=round(now, 3),
                project=f"project-{project:02d}",
                queue=queue,
                gpus=rng.choices(sizes, weights)[0],
                duration=round(
                    min(longest, max(60.0, rng.lognormvariate(math.log(median), sigma))), 1
                ),
                priority=None if rng.random() < 0.7 else rng.choice((100, 300, 500, 800, 1000)),
            )
        )
    return jobs


def naive_fifo(capacity: int, jobs: list[TraceJob]) -> float:
    """One queue, one pool, strict FIFO: returns the mean wait (used so no work is skipped)."""
    running: list[float] = []  # end times, in a heap, paired with gpus below
    gpus_at: dict[float, int] = {}
    free, now, total_wait = capacity, 0.0, 0.0
    pending = [job for job in jobs if job.gpus <= capacity]
    for job in pending:
        now = max(now, job.submit)
        while free < job.gpus or (running and running[0] <= now):
            end = heapq.heappop(running)
            free += gpus_at.pop(end)
            now = max(now, end)
        end = now + job.duration
        while end in gpus_at:
            end = math.nextafter(end, math.inf)
        gpus_at[end] = job.gpus
        heapq.heappush(running, end)
        free -= job.gpus
        total_wait += now - job.submit
    return total_wait / max(1, len(pending))


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def measure(n: int, repeat: int) -> dict[str, Any]:
    model = bench_platform()
    jobs = bench_trace(n)
    capacity = sum(model.pools.values())
    series: dict[str, Callable[[], Any]] = {
        "simulate": lambda: simulate(model, jobs),
        "floor": lambda: naive_fifo(capacity, jobs),
    }
    seconds: dict[str, list[float]] = {name: [] for name in series}
    results: dict[str, Any] = {}
    for function in series.values():
        timed(function)  # warm-up
    for round_number in range(repeat):
        names = list(series) if round_number % 2 == 0 else list(reversed(series))
        for name in names:
            elapsed, results[name] = timed(series[name])
            seconds[name].append(elapsed)
    result = results["simulate"]
    summary = result.to_json(include_jobs=False)["summary"]
    return {
        "jobs": n,
        "seconds": seconds,
        "median": {name: statistics.median(values) for name, values in seconds.items()},
        "simulation": summary,
        "floor_mean_wait": results["floor"],
    }


def smoke_check(model: PlatformModel, jobs: list[TraceJob]) -> bool:
    """The outcome is whole: each job finished or has a reason, every pending second of
    each project and queue is credited to a cause, and some job waited (the trace loads
    the platform)."""
    result = simulate(model, jobs)
    problems = [
        job.id for job in result.jobs if (job.end is None) == (job.id not in result.reasons)
    ]
    pending: dict[tuple[str, str], float] = {}
    for job in result.jobs:
        if job.start is None:
            continue
        gaps = zip(job.runs, job.runs[1:], strict=False)
        waited = job.start - job.submit + sum(b.start - a.end for a, b in gaps)
        pending[(job.project, job.queue)] = pending.get((job.project, job.queue), 0.0) + waited
    for key, seconds in pending.items():
        held = sum(result.held.get(key, {}).values())
        if abs(held - seconds) > 1e-6 * max(1.0, seconds):
            problems.append(f"{key}: pending {seconds:.1f} s, held {held:.1f} s")
    if not pending or not any(pending.values()):
        problems.append("no job waited: the trace does not load the platform")
    for problem in problems[:20]:
        print(f"smoke: {problem}", file=sys.stderr)
    return not problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, TARGET_SIZE])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="Folder for the JSON.")
    parser.add_argument(
        "--smoke", action="store_true", help="One small round (CI: the benchmark still works)."
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.repeat = [2_000], 1
        if not smoke_check(bench_platform(), bench_trace(2_000)):
            return 1
    load_before = os.getloadavg()
    rows = [measure(n, args.repeat) for n in sorted(args.sizes)]
    header = (
        "| N | simulate s | floor s | simulate / floor | simulate jobs/s | floor jobs/s "
        "| preemptions | wait p50 / p95 s | utilisation |"
    )
    print(header)
    print("|" + "---:|" * 9)
    for row in rows:
        sim, floor = row["median"]["simulate"], row["median"]["floor"]
        summary = row["simulation"]
        print(
            f"| {row['jobs']:,} | {sim:.2f} | {floor:.3f} | {sim / floor:.1f}x "
            f"| {row['jobs'] / sim:,.0f} | {row['jobs'] / floor:,.0f} "
            f"| {summary['preemptions']:,} | {summary['wait']['p50']:.0f} / "
            f"{summary['wait']['p95']:.0f} | {summary['utilisation']:.1%} |"
        )
    if len(rows) > 1:
        small, large = rows[0], rows[-1]
        per_job = (large["median"]["simulate"] / large["jobs"]) / (
            small["median"]["simulate"] / small["jobs"]
        )
        print(
            f"\nscaling {small['jobs']:,} -> {large['jobs']:,}: "
            f"{per_job:.2f}x the time per job (1.0 is linear)"
        )
    for row in rows:
        if row["jobs"] == TARGET_SIZE:
            sim = row["median"]["simulate"]
            verdict = "met" if sim < TARGET_SECONDS else "NOT met"
            limit = f"{TARGET_SIZE:,} jobs under {TARGET_SECONDS:.0f} s"
            print(f"target: {limit}: {verdict} ({sim:.2f} s)")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "simulate.json").write_text(
        json.dumps(
            {
                "rows": rows,
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                },
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "revision": git_revision(),
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
