"""Benchmark: `trainform validate` of thousands of broken spec files stays within one run's
bounds: time, peak memory and output do not grow with the number of diagnostics.

Each case is a spec folder written under bench/out/many/<case>/ (trainform.yaml, a base
platform, then one file per broken document):

- typos: 20,000 TrainingJobs, each with `command` spelt `comand` (one error a file);
- many-errors: 5,000 TrainingJobs with 101 unknown fields each (5.9 MB of YAML);
- duplicate-keys: 20,000 TrainingJobs repeating `queue` (a YAML error a file);
- unresolved: 20,000 valid TrainingJobs naming a queue nobody declared.

For each, `trainform validate DIR` runs as a subprocess, `--repeat` times after one
untimed warm-up; reported: median wall time, peak memory (max RSS of the child, from
os.wait4), bytes of output, the exit code and whether the run's count line
(`too-many-diagnostics`, "... more problems not shown") was printed. Limits: 10 s, 300 MB
and 1 MB of output per case (before the run-wide budget, typos took 27 s, 503 MB and
17.6 MB; many-errors 108 s, 1 GB and 122 MB). It exits 1 when a case goes over a limit,
does not fail validation, or has no count line. `--smoke` writes 1,200 files a case (just
over the budget of 1,000 diagnostics) and runs each once, without a warm-up: it checks the
exit code, the count line and the output bound, and prints the time and memory limits
without enforcing them (timing belongs here, not in tests). Raw numbers:
bench/out/many.json.

    .venv/bin/python bench/bench_many_files.py [--repeat 3] [--smoke]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench.bench_validate import (  # noqa: E402
    Run,
    child_environment,
    git_revision,
    run_once,
    trainform_executable,
)

CONFIG = "apiVersion: trainform/v1\nproviders:\n  - {name: local, type: local}\n"
BASE = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: research}
spec: {owners: [ml-platform@example.com]}
---
apiVersion: trainform/v1
kind: Image
metadata: {name: trainer}
spec: {reference: "registry.example.com/ml/trainer:v1"}
"""
COUNT_LINE = "[too-many-diagnostics]"
MAX_SECONDS, MAX_MB, MAX_OUTPUT = 10.0, 300.0, 1_000_000


def job(number: int, body: str = "  command: [python, train.py]\n", queue: str = "") -> str:
    return (
        "apiVersion: trainform/v1\n"
        "kind: TrainingJob\n"
        f"metadata: {{name: job-{number}, project: research}}\n"
        "spec:\n"
        f"  queue: {queue or 'training'}\n"
        "  image: trainer\n"
        f"{body}"
        "  resources: {cpu: 8, memory: 64Gi}\n"
    )


def typo(number: int) -> str:
    return job(number, "  comand: [python, train.py]\n")


def many_errors(number: int) -> str:
    return job(number) + "".join(f"  unknown{field}: 1\n" for field in range(101))


def duplicate_key(number: int) -> str:
    return job(number) + "  queue: again\n"


def unresolved(number: int) -> str:
    return job(number, queue="nowhere")


@dataclass
class Case:
    name: str
    write: Callable[[int], str]
    files: int
    runs: list[Run] = field(default_factory=list)
    output_bytes: int = 0
    counted: bool = True
    input_bytes: int = 0

    @property
    def median_seconds(self) -> float:
        return statistics.median(run.seconds for run in self.runs)

    @property
    def peak_mb(self) -> float:
        return max(run.peak_mb for run in self.runs)

    def problems(self, limits: bool = True) -> list[str]:
        found = []
        if limits and self.median_seconds > MAX_SECONDS:
            found.append(f"{self.median_seconds:.2f} s > {MAX_SECONDS:g} s")
        if limits and self.peak_mb > MAX_MB:
            found.append(f"{self.peak_mb:.0f} MB > {MAX_MB:g} MB")
        if self.output_bytes > MAX_OUTPUT:
            found.append(f"{self.output_bytes:,} bytes of output > {MAX_OUTPUT:,}")
        if any(run.exit_code != 1 for run in self.runs):
            found.append(f"exit codes {sorted({run.exit_code for run in self.runs})}, expected 1")
        if not self.counted:
            found.append(f"no {COUNT_LINE} line")
        return found


CASES = [
    Case("typos", typo, 20_000),
    Case("many-errors", many_errors, 5_000),
    Case("duplicate-keys", duplicate_key, 20_000),
    Case("unresolved", unresolved, 20_000),
]
SMOKE_FILES = 1_200


def write_case(folder: Path, case: Case, files: int) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "jobs").mkdir(parents=True)
    (folder / "trainform.yaml").write_text(CONFIG, encoding="utf-8")
    (folder / "base.yaml").write_text(BASE, encoding="utf-8")
    total = 0
    for number in range(files):
        text = case.write(number)
        (folder / "jobs" / f"{number:05d}.yaml").write_text(text, encoding="utf-8")
        total += len(text)
    case.input_bytes = total


def print_table(repeat: int, smoke: bool) -> None:
    header = ("case", "files", "input", "s", "MB", "output", "exit", "count line", "ok")
    rows = [
        (
            case.name,
            f"{case.files:,}",
            f"{case.input_bytes / 1e6:.1f} MB",
            f"{case.median_seconds:.2f}",
            f"{case.peak_mb:.0f}",
            f"{case.output_bytes / 1e3:.0f} KB",
            ",".join(str(code) for code in sorted({run.exit_code for run in case.runs})),
            "yes" if case.counted else "NO",
            "yes" if not case.problems(not smoke) else "NO",
        )
        for case in CASES
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    mode = "smoke: 1 run, time and memory not enforced" if smoke else f"median of {repeat} runs"
    print(
        f"({mode}{'' if smoke else ' after a warm-up'}; limits {MAX_SECONDS:g} s, {MAX_MB:g} MB, "
        f"{MAX_OUTPUT / 1e6:g} MB of output; peak = max RSS of the child process)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="1,200 files a case, one round.")
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args(argv)
    repeat = 1 if args.smoke else max(1, args.repeat)

    trainform = trainform_executable()
    args.out.mkdir(parents=True, exist_ok=True)
    env = child_environment(args.out.resolve() / "pycache")
    load_before = os.getloadavg()
    for case in CASES:
        if args.smoke:
            case.files = SMOKE_FILES
        folder = args.out / "many" / case.name
        write_case(folder, case, case.files)
        command = [trainform, "validate", str(folder)]
        warm_up = 0 if args.smoke else 1  # a smoke run times nothing
        for round_number in range(repeat + warm_up):
            run, output = run_once(command, env)
            case.output_bytes = max(case.output_bytes, len(output.encode("utf-8")))
            case.counted = case.counted and COUNT_LINE in output
            if round_number >= warm_up:
                case.runs.append(run)
        print(f"{case.name}: done", file=sys.stderr, flush=True)
        if args.smoke:
            shutil.rmtree(folder)
    print_table(repeat, args.smoke)

    report = {
        "benchmark": "many-files",
        "smoke": args.smoke,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "revision": git_revision(),
        "cases": [
            {
                "name": case.name,
                "files": case.files,
                "input_bytes": case.input_bytes,
                "runs": [asdict(run) for run in case.runs],
                "median_seconds": case.median_seconds,
                "peak_mb": case.peak_mb,
                "output_bytes": case.output_bytes,
                "counted": case.counted,
                "problems": case.problems(not args.smoke),
            }
            for case in CASES
        ],
    }
    path = args.out / ("many-smoke.json" if args.smoke else "many.json")
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"raw numbers: {path}")
    enforce = not args.smoke
    failed = [
        f"{case.name}: {'; '.join(case.problems(enforce))}"
        for case in CASES
        if case.problems(enforce)
    ]
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
