"""Write recent.csv: two days of this platform's jobs, for `trainform review --trace`.

    python examples/platform/traces/make_trace.py          # rewrites traces/recent.csv

A stand-in for an export of the last days of the schedulers' accounting (Kueue workloads
and `sacct`), in the columns of docs/simulation.md. Each project submits to the queues its
Quotas name, at sizes its work asks for: llm-pretrain whole multi-node runs on `pretrain`
and node-sized fine-tunes, alignment Slurm batches, eval-team many short evaluations.
Seeded `random.Random`, so the same seed writes the same bytes everywhere.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOURS = 48
# project, queue, jobs per hour, GPU sizes, median minutes
MIX = (
    ("llm-pretrain", "pretrain", 0.15, (32, 64, 96), 600),
    ("llm-pretrain", "finetune", 0.5, (8, 16, 32), 180),
    ("llm-pretrain", "eval", 1.0, (1, 2, 8), 30),
    ("alignment", "finetune", 0.4, (8, 16), 240),
    ("alignment", "hpc-batch", 0.6, (8, 16, 32), 300),
    ("alignment", "hpc-debug", 0.5, (1, 8), 20),
    ("eval-team", "eval", 3.0, (1, 2, 4, 8), 20),
    ("eval-team", "hpc-batch", 0.3, (8, 16), 120),
)
URGENT, URGENT_SHARE = 900, 0.05


def make_rows(seed: int) -> list[str]:
    rng = random.Random(seed)
    jobs = []
    for project, queue, rate, sizes, median in MIX:
        submit = 0.0
        while True:
            submit += rng.expovariate(rate / 3600)
            if submit >= HOURS * 3600:
                break
            minutes = min(24 * 60, max(5, rng.lognormvariate(math.log(median), 0.8)))
            priority = str(URGENT) if rng.random() < URGENT_SHARE else ""
            jobs.append((round(submit), project, queue, rng.choice(sizes), round(minutes * 60),
                         priority))
    jobs.sort()
    rows = ["id,submit,project,queue,gpus,duration,priority"]
    for number, (submit, project, queue, gpus, duration, priority) in enumerate(jobs):
        rows.append(f"job-{number:04d},{submit},{project},{queue},{gpus},{duration},{priority}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--out", type=Path, default=HERE / "recent.csv")
    args = parser.parse_args()
    args.out.write_text("\n".join(make_rows(args.seed)) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
