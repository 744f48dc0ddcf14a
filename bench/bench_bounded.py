"""Benchmark: `trainform validate` on hostile spec folders finishes fast, in little memory.

Each case is a spec folder a pull request could carry, written under bench/out/bounded/:

- template-bomb: a 1.2 KB value with four nested `{% for %}` loops over 100-item lists
  (10^8 iterations if nothing bounded them);
- wrong-list: a TrainingJob whose `command` is a list of 1,000,000 numbers (each one a
  validation error);
- alias-bomb: "billion laughs", nine levels of ten aliases of the level below;
- huge-file: a 50 MB spec file.

For each, `trainform validate DIR` runs as a subprocess, `--repeat` times after one
untimed warm-up (which fills the bytecode cache); reported: median wall time, peak memory
(max RSS of the child, from os.wait4), the exit code and whether the expected diagnostic
code was printed. Limits: 5 s and 500 MB per case (2 s and 200 MB for the template bomb).
It exits 1 when a case goes over a limit, does not fail validation, or fails without its
diagnostic. `--smoke` runs the same cases through the same code paths with smaller inputs,
once: a CI test runs it to keep the benchmark working, so it exits 1 only for a wrong
outcome and prints the limits without enforcing them (timing belongs here, not in tests).
Raw numbers: bench/out/bounded.json.

    .venv/bin/python bench/bench_bounded.py [--repeat 3] [--smoke]
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
from collections.abc import Callable, Iterator
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
PLATFORM = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: research}
spec: {owners: [ml-platform@example.com]}
---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: a100}
spec: {provider: local, nodes: 2, cpu: 64, memory: 512Gi}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: training}
spec:
  pools:
    - pool: a100
      nominalQuota: {cpu: 64, memory: 512Gi}
---
apiVersion: trainform/v1
kind: Image
metadata: {name: trainer}
spec: {reference: "registry.example.com/ml/trainer:v1"}
"""


def job(command: str = "[python, train.py]", parameters: str = "{}") -> str:
    return (
        "apiVersion: trainform/v1\n"
        "kind: TrainingJob\n"
        "metadata: {name: bigram, project: research}\n"
        "spec:\n"
        "  queue: training\n"
        "  image: trainer\n"
        f"  command: {command}\n"
        f"  parameters: {parameters}\n"
        "  resources: {cpu: 8, memory: 64Gi}\n"
    )


def template_bomb(smoke: bool) -> str:
    """Four nested loops over 100-item lists (about 1.2 KB), whatever the mode: the bound
    is what stops it, so the smoke run is the real case."""
    items = "[" + ",".join(str(i) for i in range(100)) + "]"
    loops = "".join(f"{{% for {v} in {items} %}}" for v in "abcd")
    value = loops + "{{ a }}{{ b }}{{ c }}{{ d }}" + "{% endfor %}" * 4
    return job(parameters=f"{{bomb: '{value}'}}")


def wrong_list(smoke: bool) -> str:
    count = 60_000 if smoke else 1_000_000  # both over the loader's 50,000 values
    return job(command="[" + ", ".join(["1"] * count) + "]")


def alias_bomb(smoke: bool) -> str:
    levels = 6 if smoke else 9
    lines = ['l0: &l0 "lol"']
    for level in range(1, levels + 1):
        below = ", ".join([f"*l{level - 1}"] * 10)
        lines.append(f"l{level}: &l{level} [{below}]")
    return job() + "---\n" + "\n".join(lines) + "\n"


def huge_file(smoke: bool) -> Iterator[str]:
    """Written in chunks: a benchmark holding 50 MB would count them in its children's
    peak memory (a child's max RSS includes the parent image it was forked from)."""
    size = 6 * 1024 * 1024 if smoke else 50 * 1024 * 1024
    chunk = ("---\n" + job()) * 1000
    for _ in range(size // len(chunk) + 1):
        yield chunk


@dataclass
class Case:
    name: str
    write: Callable[[bool], str | Iterator[str]]
    expected_code: str
    max_seconds: float = 5.0
    max_mb: float = 500.0
    runs: list[Run] = field(default_factory=list)
    printed_code: bool = False
    input_bytes: int = 0

    @property
    def median_seconds(self) -> float:
        return statistics.median(run.seconds for run in self.runs)

    @property
    def peak_mb(self) -> float:
        return max(run.peak_mb for run in self.runs)

    def problems(self, limits: bool = True) -> list[str]:
        found = []
        if limits and self.median_seconds > self.max_seconds:
            found.append(f"{self.median_seconds:.2f} s > {self.max_seconds:g} s")
        if limits and self.peak_mb > self.max_mb:
            found.append(f"{self.peak_mb:.0f} MB > {self.max_mb:g} MB")
        if any(run.exit_code != 1 for run in self.runs):
            found.append(f"exit codes {sorted({run.exit_code for run in self.runs})}, expected 1")
        if not self.printed_code:
            found.append(f"no `{self.expected_code}` diagnostic")
        return found


CASES = [
    Case("template-bomb", template_bomb, "template-limit", max_seconds=2.0, max_mb=200.0),
    Case("wrong-list", wrong_list, "too-many-diagnostics"),
    Case("alias-bomb", alias_bomb, "alias-limit"),
    Case("huge-file", huge_file, "file-too-large"),
]


def write_case(folder: Path, case: Case, smoke: bool) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "trainform.yaml").write_text(CONFIG, encoding="utf-8")
    (folder / "platform.yaml").write_text(PLATFORM, encoding="utf-8")
    written = case.write(smoke)
    with (folder / "case.yaml").open("w", encoding="utf-8") as out:
        for chunk in [written] if isinstance(written, str) else written:
            out.write(chunk)
    case.input_bytes = (folder / "case.yaml").stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="Smaller inputs, one round.")
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args(argv)
    repeat = 1 if args.smoke else max(1, args.repeat)

    trainform = trainform_executable()
    args.out.mkdir(parents=True, exist_ok=True)
    env = child_environment(args.out.resolve() / "pycache")
    load_before = os.getloadavg()
    for case in CASES:
        folder = args.out / "bounded" / case.name
        write_case(folder, case, args.smoke)
        command = [trainform, "validate", str(folder)]
        for round_number in range(repeat + 1):
            run, output = run_once(command, env)
            case.printed_code = case.printed_code or f"[{case.expected_code}]" in output
            if round_number:  # the first run is the warm-up
                case.runs.append(run)
        print(f"{case.name}: done", file=sys.stderr, flush=True)

    header = ("case", "input", "s", "limit s", "MB", "limit MB", "exit", "diagnostic", "ok")
    rows = []
    for case in CASES:
        rows.append(
            (
                case.name,
                f"{case.input_bytes / 1e6:.2f} MB"
                if case.input_bytes > 1e5
                else f"{case.input_bytes / 1e3:.1f} KB",
                f"{case.median_seconds:.2f}",
                f"{case.max_seconds:g}",
                f"{case.peak_mb:.0f}",
                f"{case.max_mb:g}",
                ",".join(str(code) for code in sorted({run.exit_code for run in case.runs})),
                case.expected_code if case.printed_code else f"missing {case.expected_code}",
                "yes" if not case.problems() else "NO",
            )
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    mode = "smoke: 1 run, limits shown, not enforced" if args.smoke else f"median of {repeat} runs"
    print(f"({mode} after a warm-up; peak = max RSS of the child process)")

    report = {
        "benchmark": "bounded",
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
                "input_bytes": case.input_bytes,
                "runs": [asdict(run) for run in case.runs],
                "median_seconds": case.median_seconds,
                "peak_mb": case.peak_mb,
                "limits": {"seconds": case.max_seconds, "mb": case.max_mb},
                "expected_code": case.expected_code,
                "printed_code": case.printed_code,
                "problems": case.problems(not args.smoke),
            }
            for case in CASES
        ],
    }
    path = args.out / ("bounded-smoke.json" if args.smoke else "bounded.json")
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
