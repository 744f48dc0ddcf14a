"""Benchmark: `trainform validate` end to end against a floor, side by side.

For each size N (default 1,000 and 10,000 resources) a realistic spec folder is generated
with bench/generate_specs.py, then two subprocesses are timed, interleaved, `--repeat`
times each after one untimed warm-up:

- trainform: the venv's console script, `trainform validate DIR`;
- floor: `python bench/floor_validate.py DIR`, the same files parsed with the fastest YAML
  parser available and validated against plain pydantic models (no custom validators,
  references, positions or templating): the least work any validator must do.

Reported per N: median wall time of each, the ratio trainform/floor, and peak memory
(max RSS of each child, from os.wait4). Raw numbers go to bench/out/validate.json.
This is a benchmark, not a test: it asserts nothing about time; it exits non-zero only
when a command fails (e.g. the generated specs do not validate).

    .venv/bin/python bench/bench_validate.py [--sizes 1000 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench.generate_specs import generate  # noqa: E402

TARGET_RATIO = 2.0
TARGET_PEAK_MB = 400.0
TARGET_SIZE = 10_000


@dataclass
class Run:
    seconds: float
    peak_mb: float
    exit_code: int


@dataclass
class Series:
    command: list[str]
    runs: list[Run] = field(default_factory=list)

    @property
    def median_seconds(self) -> float:
        return statistics.median(run.seconds for run in self.runs)

    @property
    def peak_mb(self) -> float:
        return max(run.peak_mb for run in self.runs)


def trainform_executable() -> str:
    """The venv's console script next to this interpreter, else `trainform` on PATH."""
    candidate = Path(sys.executable).parent / "trainform"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("trainform")
    if not found:
        raise SystemExit("cannot find the trainform console script; run with the venv's python")
    return found


def child_environment(pycache: Path) -> dict[str, str]:
    """Environment of the timed commands: no colour, and bytecode cached (as in any real
    install) under bench/out/ rather than in the source tree, even where the calling
    environment sets PYTHONDONTWRITEBYTECODE; the warm-up run fills the cache."""
    env = dict(os.environ, NO_COLOR="1", PYTHONPYCACHEPREFIX=str(pycache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(command: list[str], env: dict[str, str]) -> tuple[Run, str]:
    """Run `command`, return wall time, the child's own peak RSS and its exit code."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read().decode("utf-8", "replace")
    # ru_maxrss is in kilobytes on Linux, in bytes on macOS.
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return Run(seconds, usage.ru_maxrss / scale, process.returncode), output


def measure(series: list[Series], repeat: int, env: dict[str, str]) -> None:
    """One warm-up each, then `repeat` rounds, alternating which command goes first."""
    for one in series:
        run, output = run_once(one.command, env)
        if run.exit_code != 0:
            raise SystemExit(f"{' '.join(one.command)} failed ({run.exit_code}):\n{output[-4000:]}")
    for round_number in range(repeat):
        order = series if round_number % 2 == 0 else list(reversed(series))
        for one in order:
            run, output = run_once(one.command, env)
            if run.exit_code != 0:
                raise SystemExit(f"{' '.join(one.command)} failed:\n{output[-4000:]}")
            one.runs.append(run)


def git_revision() -> str:
    """Commit of the code under test, `-dirty` when tracked files have local changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return git("rev-parse", "--short", "HEAD") + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--out",
        type=Path,
        default=BENCH / "out",
        help="Folder for generated specs and validate.json (default bench/out).",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="One small round (CI: the benchmark still works)."
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.repeat = [200], 1
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    trainform = trainform_executable()
    load_before = os.getloadavg()
    floor = [sys.executable, str(BENCH / "floor_validate.py")]
    args.out.mkdir(parents=True, exist_ok=True)
    env = child_environment(args.out.resolve() / "pycache")
    results = []
    for n in args.sizes:
        folder = args.out / f"specs-{n}"
        counts = generate(folder, n, seed=args.seed)
        print(
            f"N={n}: {counts['files']} files, {counts['bytes'] / 1e6:.1f} MB, "
            f"{counts['references']} references; timing {args.repeat} rounds...",
            file=sys.stderr,
            flush=True,
        )
        product = Series([trainform, "validate", str(folder)])
        baseline = Series([*floor, str(folder)])
        measure([product, baseline], args.repeat, env)
        results.append(
            {
                "n": n,
                "counts": counts,
                "trainform": asdict(product)
                | {"median_seconds": product.median_seconds, "peak_mb": product.peak_mb},
                "floor": asdict(baseline)
                | {"median_seconds": baseline.median_seconds, "peak_mb": baseline.peak_mb},
                "ratio": product.median_seconds / baseline.median_seconds,
            }
        )

    header = ("N", "files", "trainform s", "floor s", "ratio", "trainform MB", "floor MB")
    rows = [
        (
            str(r["n"]),
            str(r["counts"]["files"]),
            f"{r['trainform']['median_seconds']:.3f}",
            f"{r['floor']['median_seconds']:.3f}",
            f"{r['ratio']:.2f}x",
            f"{r['trainform']['peak_mb']:.0f}",
            f"{r['floor']['peak_mb']:.0f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    print(f"(medians of {args.repeat} interleaved runs; peak = max RSS of the child process)")

    for r in results:
        if r["n"] == TARGET_SIZE:
            met = r["ratio"] <= TARGET_RATIO and r["trainform"]["peak_mb"] < TARGET_PEAK_MB
            print(
                f"target at N={TARGET_SIZE}: within {TARGET_RATIO:.0f}x the floor and under "
                f"{TARGET_PEAK_MB:.0f} MB -> {'met' if met else 'NOT met'} "
                f"({r['ratio']:.2f}x, {r['trainform']['peak_mb']:.0f} MB)"
            )

    report = {
        "benchmark": "validate",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "revision": git_revision(),
        "repeat": args.repeat,
        "seed": args.seed,
        "target": {"size": TARGET_SIZE, "ratio": TARGET_RATIO, "peak_mb": TARGET_PEAK_MB},
        "results": results,
    }
    path = args.out / "validate.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"raw numbers: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
