"""Write trace.csv: the bundled 2,000-job trace of two teams, deterministically.

    python examples/review/make_trace.py            # rewrites examples/review/trace.csv
    python examples/review/make_trace.py --jobs 500 --seed 3 --out /tmp/t.csv

The trace is made for a platform of one 64-GPU pool (8 nodes x 8 GPUs) shared by two
queues in one cohort, `team-a` and `team-b` (32 GPUs of nominal quota each), whose
projects are also named `team-a` and `team-b`; the review test fixture and the
acceptance criterion of issue 8 move 8 GPUs of nominal quota from team-a to team-b.

Mix: team-a submits 60% of the jobs, team-b 40%. Sizes are what training and evaluation
work asks for: single GPUs (debugging, evals) to whole nodes (8) and multi-node runs
(16, 32), weighted toward the small ones. Durations are log-normal (median 45 minutes,
from 5 minutes to 24 hours), whole seconds. One job in ten carries priority 200 (urgent),
the rest the queue's default. Arrivals are Poisson, with twice the rate in working hours
(08:00-20:00) as at night, scaled so the offered load is 85% of the 64 GPUs: queues
build up in the day and drain at night, and quota changes show in the waits.

Only the standard library's seeded `random.Random` is used, so the same seed writes the
same bytes on every machine and Python version that keeps its algorithm (3.2+).
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
POOL_GPUS = 64
LOAD = 0.85
TEAMS = (("team-a", 0.6), ("team-b", 0.4))
SIZES = ((1, 30), (2, 15), (4, 15), (8, 25), (16, 10), (32, 5))
MEDIAN, SIGMA, SHORTEST, LONGEST = 45 * 60, 1.0, 5 * 60, 24 * 3600
URGENT, URGENT_SHARE = 200, 0.1
DAY, NIGHT = 2.0, 1.0  # relative submission rate in working hours and at night


def rate_factor(seconds: float) -> float:
    hour = (seconds % 86400) / 3600
    return DAY if 8 <= hour < 20 else NIGHT


def make_rows(jobs: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    sizes, weights = zip(*SIZES, strict=True)
    drawn = []
    for _ in range(jobs):
        team = "team-a" if rng.random() < TEAMS[0][1] else "team-b"
        gpus = rng.choices(sizes, weights)[0]
        duration = round(min(LONGEST, max(SHORTEST, rng.lognormvariate(math.log(MEDIAN), SIGMA))))
        priority = str(URGENT) if rng.random() < URGENT_SHARE else ""
        drawn.append((team, gpus, duration, priority, rng.expovariate(1.0)))
    # Mean arrival rate so that GPU-seconds offered / elapsed = LOAD x POOL_GPUS.
    work = sum(gpus * duration for _, gpus, duration, _, _ in drawn)
    mean_rate = jobs * LOAD * POOL_GPUS / work  # jobs per second
    average_factor = (DAY + NIGHT) / 2
    rows = ["id,submit,project,queue,gpus,duration,priority"]
    now = 0.0
    for index, (team, gpus, duration, priority, gap) in enumerate(drawn):
        now += gap / (mean_rate * rate_factor(now) / average_factor)
        rows.append(f"job-{index:04d},{round(now)},{team},{team},{gpus},{duration},{priority}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=HERE / "trace.csv")
    args = parser.parse_args(argv)
    args.out.write_text("\n".join(make_rows(args.jobs, args.seed)) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
