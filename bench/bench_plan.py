"""Benchmark: `trainform plan --no-refresh` and apply at scale, with Terraform side by side.

For each size N (default 1,000, 5,000 and 10,000 resources) bench/generate_local.py writes a
spec folder of N resources that the local provider reconciles, twice: as generated, and
with 1% of the resources edited in place. Then:

- plan, timed as subprocesses, interleaved, `--repeat` rounds after one untimed warm-up:
  `trainform plan DIR --no-refresh` against an empty state, the same against a full state
  of the unedited specs (so 1% of the resources change), and, when `terraform` is on PATH,
  `terraform plan -refresh=false` of the same platform as `terraform_data` resources against
  an empty state. The full state is made once per N by applying in-process through the
  library with NullProvider (below), which does no I/O.
- apply, in-process through the library: a worker process loads the specs, plans, and
  times `apply_plan` alone, with NullProvider and the real LocalBackend (one fsynced journal
  line per entry, compaction every 1,000 entries) in a fresh temporary folder under
  bench/out/; side by side, `terraform apply -auto-approve` end to end (which includes its
  plan) at 100, 300 and 1,000 resources, from an empty state each time.

Reported: median seconds, ratios, seconds per 1,000 resources and peak memory (max RSS of
each child, from os.wait4). Raw numbers go to bench/out/plan.json. This is a benchmark,
not a test: it asserts nothing about time; it exits non-zero only when a command fails or
prints a plan other than the one expected (N creates; 1% updates).

    .venv/bin/python bench/bench_plan.py [--sizes 1000 5000 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from trainform.providers.base import (  # noqa: E402
    DesiredResource,
    KindSchema,
    Observation,
    ObserveRequest,
    Provider,
)
from trainform.providers.local.provider import LocalProvider  # noqa: E402

from bench.bench_validate import (  # noqa: E402
    Run,
    child_environment,
    git_revision,
    run_once,
    trainform_executable,
)
from bench.generate_local import generate_local, generate_terraform  # noqa: E402

TARGET_RATIO = 15.0  # terraform plan / trainform plan at TARGET_SIZE
TARGET_PEAK_MB = 400.0
TARGET_SIZE = 10_000
LINEAR_TOLERANCE = 1.3  # marginal cost per 1,000 may grow this much between size steps
PARALLELISM = 10

TERRAFORM_RC = """\
# Written by bench/bench_plan.py: no update checks, and no provider is ever downloaded
# (terraform_data is built in), so terraform never reaches the network.
disable_checkpoint = true
provider_installation {
  filesystem_mirror {
    path    = "%s"
    include = ["*/*/*"]
  }
}
"""


class NullProvider(Provider):
    """The local provider's kinds and schemas, kept in a dict: no I/O at all."""

    type = "local"
    schemas: ClassVar[dict[str, KindSchema]] = dict(LocalProvider.schemas)

    def __init__(self) -> None:
        super().__init__()
        self.objects: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        with self._lock:
            found = {r.address: self.objects.get(r.address) for r in requests}
        return {
            address: Observation(exists=document is not None, live=document)
            for address, document in found.items()
        }

    def create(self, resource: DesiredResource) -> dict[str, Any]:
        with self._lock:
            self.objects[resource.address] = resource.document
        return {}

    def update(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        return self.create(resource)

    def delete(self, address: str, kind: str, outputs: dict[str, Any]) -> None:
        with self._lock:
            self.objects.pop(address, None)


def apply_worker(spec_dir: Path, state_root: Path, parallelism: int) -> dict[str, Any]:
    """Load, plan (no refresh) and apply `spec_dir` through NullProvider into the state
    backend its trainform.yaml names, resolved under `state_root`; time apply_plan alone."""
    from trainform.planner.apply import OutcomeStatus, apply_plan
    from trainform.planner.plan import PlanOptions, make_plan
    from trainform.planner.session import ProviderSet
    from trainform.planner.workspace import make_backend
    from trainform.specs import load_specs

    started = time.perf_counter()
    specs = load_specs(str(spec_dir))
    loaded = time.perf_counter()
    providers = ProviderSet(specs.config, spec_dir, classes={"local": NullProvider})
    backend = make_backend(specs.config, state_root)
    stats = {"journal_seconds": 0.0, "entries": 0, "compaction_seconds": 0.0, "compactions": 0}
    record, compact = backend.record, backend.compact

    def timed_compact(state: Any) -> None:
        start = time.perf_counter()
        compact(state)
        stats["compaction_seconds"] += time.perf_counter() - start
        stats["compactions"] += 1

    def timed_record(state: Any, entry: dict[str, Any]) -> None:
        start, before = time.perf_counter(), stats["compaction_seconds"]
        record(state, entry)
        inner = stats["compaction_seconds"] - before
        stats["journal_seconds"] += time.perf_counter() - start - inner
        stats["entries"] += 1

    info = backend.lock("apply")
    try:
        plan = make_plan(specs, backend.read(), providers, PlanOptions(refresh=False))
        planned = time.perf_counter()
        backend.record, backend.compact = timed_record, timed_compact  # type: ignore[method-assign]
        start = time.perf_counter()
        result = apply_plan(plan, backend, providers, parallelism=parallelism)
        apply_seconds = time.perf_counter() - start
    finally:
        backend.unlock(info)
        providers.close()
    state = backend.read()
    return {
        "resources": len(specs.resources),
        "changes": len(plan.actionable),
        "applied": result.count(OutcomeStatus.APPLIED),
        "failed": result.failed,
        "state_resources": len(state.resources) if state else 0,
        "load_seconds": loaded - started,
        "plan_seconds": planned - loaded,
        "apply_seconds": apply_seconds,
        **stats,
    }


# ---------------------------------------------------------------------------------------


@dataclass
class Timed:
    """One command timed in rounds; `worker` commands report their own seconds as JSON."""

    name: str
    command: list[str]
    env: dict[str, str]
    repeat: int
    warmup: bool = True
    expect: str = ""  # a regular expression the output must match
    worker: bool = False
    before: Callable[[], None] | None = None
    runs: list[Run] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seconds(self) -> list[float]:
        if self.worker:
            return [detail["apply_seconds"] for detail in self.details]
        return [run.seconds for run in self.runs]

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.seconds)

    @property
    def peak_mb(self) -> float:
        return max(run.peak_mb for run in self.runs)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "runs": [asdict(run) for run in self.runs],
            "details": self.details,
            "seconds": self.seconds,
            "median_seconds": self.median_seconds,
            "peak_mb": self.peak_mb,
        }


def execute(one: Timed, keep: bool) -> None:
    if one.before is not None:
        one.before()
    run, output = run_once(one.command, one.env)
    if run.exit_code != 0:
        raise SystemExit(f"{' '.join(one.command)} failed ({run.exit_code}):\n{output[-4000:]}")
    if one.expect and not re.search(one.expect, output, re.MULTILINE):
        raise SystemExit(
            f"{' '.join(one.command)}: output does not match {one.expect!r}:\n{output[-4000:]}"
        )
    if not keep:
        return
    one.runs.append(run)
    if one.worker:
        detail = json.loads(output.strip().splitlines()[-1])
        if detail["failed"] or detail["applied"] != detail["changes"]:
            raise SystemExit(f"{' '.join(one.command)}: apply failed: {detail}")
        one.details.append(detail)


def measure(series: list[Timed]) -> None:
    """A warm-up each (where wanted), then rounds alternating the order, until every
    command has its `repeat` runs."""
    for one in series:
        if one.warmup:
            execute(one, keep=False)
    for round_number in range(max(one.repeat for one in series)):
        order = series if round_number % 2 == 0 else list(reversed(series))
        for one in order:
            if len(one.runs) < one.repeat:
                execute(one, keep=True)


def plan_summary(create: int, update: int) -> str:
    return (
        rf"^Plan: {create} to create, {update} to update, 0 to replace, 0 to delete\.$"
        if create or update
        else r"^No changes\."
    )


# ---------------------------------------------------------------------------------------


class Terraform:
    """The terraform binary, run offline with its own CLI configuration."""

    def __init__(self, binary: str, out: Path) -> None:
        self.binary = binary
        mirror = out / "terraform-mirror"
        mirror.mkdir(parents=True, exist_ok=True)
        rc = out / "terraform.tfrc"
        rc.write_text(TERRAFORM_RC % mirror.resolve(), encoding="utf-8")
        self.env = dict(
            os.environ,
            TF_IN_AUTOMATION="1",
            TF_INPUT="0",
            CHECKPOINT_DISABLE="1",
            TF_CLI_CONFIG_FILE=str(rc.resolve()),
            NO_COLOR="1",
        )
        for name in ("TF_PLUGIN_CACHE_DIR", "TF_LOG", "TF_CLI_ARGS"):
            self.env.pop(name, None)
        self.version = self._version()

    def _version(self) -> str:
        result = subprocess.run(
            [self.binary, "version", "-json"], capture_output=True, text=True, env=self.env
        )
        try:
            return str(json.loads(result.stdout)["terraform_version"])
        except (ValueError, KeyError):
            return result.stdout.strip().splitlines()[0] if result.stdout else "unknown"

    def prepare(self, folder: Path, n: int, seed: int) -> dict[str, Any]:
        """Generate the configuration and run `terraform init` once; raises on failure."""
        counts = generate_terraform(folder, n, seed)
        start = time.perf_counter()
        result = subprocess.run(
            [self.binary, f"-chdir={folder}", "init", "-input=false", "-no-color"],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
        )
        if result.returncode != 0:
            raise RuntimeError(f"terraform init failed:\n{(result.stdout + result.stderr)[-2000:]}")
        return {"counts": counts, "init_seconds": time.perf_counter() - start}

    def plan(self, folder: Path) -> list[str]:
        return [
            self.binary,
            f"-chdir={folder}",
            "plan",
            "-refresh=false",
            "-input=false",
            "-no-color",
            f"-parallelism={PARALLELISM}",
        ]

    def apply(self, folder: Path) -> list[str]:
        return [
            self.binary,
            f"-chdir={folder}",
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            f"-parallelism={PARALLELISM}",
        ]


def empty_state(folder: Path) -> Callable[[], None]:
    def remove() -> None:
        for path in folder.glob("terraform.tfstate*"):
            path.unlink()

    return remove


# ---------------------------------------------------------------------------------------


def marginal(points: list[tuple[int, float]]) -> list[dict[str, float]]:
    """Seconds per 1,000 resources between consecutive sizes (the fixed start-up cancels)."""
    return [
        {"from": a, "to": b, "seconds_per_1000": (tb - ta) / (b - a) * 1000}
        for (a, ta), (b, tb) in zip(points, points[1:], strict=False)
    ]


def linear_verdict(points: list[tuple[int, float]]) -> tuple[bool | None, str]:
    steps = marginal(points)
    if len(steps) < 2:
        return None, "needs three sizes"
    costs = [step["seconds_per_1000"] for step in steps]
    growth = max(later / earlier for earlier, later in zip(costs, costs[1:], strict=False))
    text = ", ".join(
        f"{step['from']:,}->{step['to']:,}: {step['seconds_per_1000']:.3f} s" for step in steps
    )
    return growth <= LINEAR_TOLERANCE, f"marginal s per 1,000: {text} (x{growth:.2f})"


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def fmt(value: float | None, pattern: str = "{:.3f}") -> str:
    if value is None or math.isnan(value):
        return "-"
    return pattern.format(value)


def filesystem(path: Path) -> str:
    """Type of the filesystem holding `path` (from /proc/mounts; fsync cost depends on it)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    best, kind = "", "unknown"
    resolved = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) > 2 and resolved.startswith(parts[1]) and len(parts[1]) > len(best):
            best, kind = parts[1], parts[2]
    return kind


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 5_000, 10_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--changed", type=float, default=0.01, help="Share edited (default 1%%).")
    parser.add_argument(
        "--terraform-plan-sizes", type=int, nargs="*", default=[1_000, 10_000], metavar="N"
    )
    parser.add_argument(
        "--terraform-apply-sizes", type=int, nargs="*", default=[100, 300, 1_000], metavar="N"
    )
    parser.add_argument(
        "--terraform-slow-repeat",
        type=int,
        default=1,
        help="Rounds (and no warm-up) for the slow Terraform runs: plan at N >= 10,000 and "
        "apply at N >= 1,000 (default 1).",
    )
    parser.add_argument("--no-terraform", action="store_true", help="Skip Terraform.")
    parser.add_argument(
        "--out",
        type=Path,
        default=BENCH / "out",
        help="Folder for generated specs and plan.json (default bench/out).",
    )
    parser.add_argument("--apply-worker", nargs=2, type=Path, metavar=("SPEC_DIR", "STATE_ROOT"))
    parser.add_argument("--parallelism", type=int, default=PARALLELISM)
    parser.add_argument(
        "--smoke", action="store_true", help="One small round (CI: the benchmark still works)."
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.repeat, args.no_terraform = [200], 1, True
        args.terraform_apply_sizes = []  # smoke: apply only at the plan size
    if args.apply_worker:
        spec_dir, state_root = args.apply_worker
        print(json.dumps(apply_worker(spec_dir, state_root, args.parallelism)))
        return 0
    if args.repeat < 1 or args.terraform_slow_repeat < 1:
        parser.error("--repeat and --terraform-slow-repeat must be at least 1")

    trainform = trainform_executable()
    load_before = os.getloadavg()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = child_environment(out.resolve() / "pycache")
    worker = [sys.executable, str(Path(__file__).resolve()), "--apply-worker"]

    terraform: Terraform | None = None
    terraform_note = "not requested" if args.no_terraform else "not on PATH"
    binary = None if args.no_terraform else shutil.which("terraform")
    if binary:
        terraform = Terraform(binary, out)
        terraform_note = f"terraform {terraform.version}"
    terraform_setup: dict[str, Any] = {}

    def terraform_folder(n: int) -> Path | None:
        """out/terraform-N generated and initialised once; None when Terraform is skipped."""
        nonlocal terraform, terraform_note
        if terraform is None:
            return None
        folder = out / f"terraform-{n}"
        if n not in terraform_setup:
            try:
                terraform_setup[n] = terraform.prepare(folder, n, args.seed)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                terraform_note = f"skipped: {exc}"
                log(f"Terraform skipped: {exc}")
                terraform = None
                return None
        return folder

    generated: dict[Path, dict[str, int]] = {}

    def local_folder(n: int, changed: float = 0.0) -> tuple[Path, dict[str, int]]:
        """out/local-N (or out/local-N-changed), generated once per run."""
        folder = out / (f"local-{n}-changed" if changed else f"local-{n}")
        if folder not in generated:
            generated[folder] = generate_local(folder, n, seed=args.seed, changed=changed)
        return folder, generated[folder]

    # plan -----------------------------------------------------------------------------
    plan_results = []
    for n in args.sizes:
        empty, counts = local_folder(n)
        edited, edited_counts = local_folder(n, args.changed)
        # The full state: the unedited specs applied through NullProvider, into the state
        # file the edited folder's trainform.yaml names.
        run, output = run_once([*worker, str(empty), str(edited)], env)
        setup = json.loads(output.strip().splitlines()[-1]) if run.exit_code == 0 else None
        if setup is None or setup["failed"] or setup["state_resources"] != n:
            raise SystemExit(f"could not make the state for N={n}:\n{output[-4000:]}")
        series = [
            Timed(
                "trainform-empty",
                [trainform, "plan", str(empty), "--no-refresh"],
                env,
                args.repeat,
                expect=plan_summary(n, 0),
            ),
            Timed(
                "trainform-changed",
                [trainform, "plan", str(edited), "--no-refresh"],
                env,
                args.repeat,
                expect=plan_summary(0, edited_counts["changed"]),
            ),
        ]
        series.append(
            Timed(
                "floor",
                [sys.executable, str(Path(__file__).with_name("floor_plan.py")), str(empty)],
                env,
                args.repeat,
                expect=plan_summary(n, 0),
            )
        )
        folder = terraform_folder(n) if n in args.terraform_plan_sizes else None
        if terraform is not None and folder is not None:
            slow = n >= 10_000
            series.append(
                Timed(
                    "terraform",
                    terraform.plan(folder),
                    terraform.env,
                    args.terraform_slow_repeat if slow else args.repeat,
                    warmup=not slow,
                    expect=rf"^Plan: {n} to add, 0 to change, 0 to destroy\.$",
                    before=empty_state(folder),
                )
            )
        load = os.getloadavg()
        log(
            f"plan N={n}: {counts['files']} files, {counts['bytes'] / 1e6:.1f} MB, "
            f"{counts['references']} references, {edited_counts['changed']} edited; "
            f"{', '.join(s.name for s in series)}; load {load[0]:.2f}..."
        )
        measure(series)
        by_name = {one.name: one for one in series}
        result: dict[str, Any] = {
            "n": n,
            "counts": counts,
            "changed": edited_counts["changed"],
            "state_setup": setup,
            "load_average": [load, os.getloadavg()],
        }
        result |= {name: one.to_json() for name, one in by_name.items()}
        result["floor_ratio"] = (
            by_name["trainform-empty"].median_seconds / by_name["floor"].median_seconds
        )
        if "terraform" in by_name:
            tf = by_name["terraform"].median_seconds
            result["terraform_counts"] = terraform_setup[n]
            result["ratio"] = tf / by_name["trainform-empty"].median_seconds
            result["ratio_changed"] = tf / by_name["trainform-changed"].median_seconds
        plan_results.append(result)

    # apply ----------------------------------------------------------------------------
    apply_sizes = sorted(set(args.sizes) | set(args.terraform_apply_sizes))
    apply_results = []
    scratch = out / "apply-state"
    scratch.mkdir(exist_ok=True)
    for n in apply_sizes:
        spec_dir, counts = local_folder(n)
        state_root = Path(tempfile.mkdtemp(prefix=f"apply-{n}-", dir=scratch))

        def fresh_state(root: Path = state_root) -> None:
            shutil.rmtree(root / ".trainform", ignore_errors=True)

        series = [
            Timed(
                "trainform",
                [*worker, str(spec_dir), str(state_root)],
                env,
                args.repeat,
                worker=True,
                before=fresh_state,
            )
        ]
        folder = terraform_folder(n) if n in args.terraform_apply_sizes else None
        if terraform is not None and folder is not None:
            slow = n >= 1_000
            series.append(
                Timed(
                    "terraform",
                    terraform.apply(folder),
                    terraform.env,
                    args.terraform_slow_repeat if slow else args.repeat,
                    warmup=not slow,
                    expect=rf"^Apply complete! Resources: {n} added, 0 changed, 0 destroyed\.$",
                    before=empty_state(folder),
                )
            )
        load = os.getloadavg()
        log(f"apply N={n}: {', '.join(s.name for s in series)}; load {load[0]:.2f}...")
        try:
            measure(series)
        finally:
            shutil.rmtree(state_root, ignore_errors=True)
        by_name = {one.name: one for one in series}
        result = {"n": n, "counts": counts, "load_average": [load, os.getloadavg()]}
        result |= {name: one.to_json() for name, one in by_name.items()}
        apply_results.append(result)
    shutil.rmtree(scratch, ignore_errors=True)

    # report ---------------------------------------------------------------------------
    def median(result: dict[str, Any], name: str) -> float | None:
        return result[name]["median_seconds"] if name in result else None

    def peak(result: dict[str, Any], name: str) -> float | None:
        return result[name]["peak_mb"] if name in result else None

    print("plan --no-refresh (end to end, subprocess):")
    print(
        table(
            (
                "N",
                "trainform empty s",
                "trainform 1% s",
                "floor s",
                "trainform/floor",
                "terraform s",
                "tf/trainform",
                "trainform MB",
                "trainform 1% MB",
                "terraform MB",
            ),
            [
                (
                    f"{r['n']:,}",
                    fmt(median(r, "trainform-empty")),
                    fmt(median(r, "trainform-changed")),
                    fmt(median(r, "floor")),
                    fmt(r.get("floor_ratio"), "{:.2f}x"),
                    fmt(median(r, "terraform")),
                    fmt(r.get("ratio"), "{:.1f}x"),
                    fmt(peak(r, "trainform-empty"), "{:.0f}"),
                    fmt(peak(r, "trainform-changed"), "{:.0f}"),
                    fmt(peak(r, "terraform"), "{:.0f}"),
                )
                for r in plan_results
            ],
        )
    )
    print(
        f"(medians of {args.repeat} interleaved runs, Terraform at N >= 10,000: "
        f"{args.terraform_slow_repeat}; peak = max RSS of the child process)"
    )
    print()
    print(
        "apply (trainform: apply_plan in-process, NullProvider, LocalBackend journal; "
        "terraform: `terraform apply` end to end):"
    )
    rows = []
    for r in apply_results:
        trainform_seconds = median(r, "trainform")
        details = r["trainform"]["details"]
        journal = statistics.median(d["journal_seconds"] for d in details)
        compaction = statistics.median(d["compaction_seconds"] for d in details)
        terraform_seconds = median(r, "terraform")
        rows.append(
            (
                f"{r['n']:,}",
                fmt(trainform_seconds),
                fmt(trainform_seconds / r["n"] * 1000 if trainform_seconds else None),
                fmt(journal),
                f"{details[0]['compactions']} / {compaction:.3f}",
                fmt(peak(r, "trainform"), "{:.0f}"),
                fmt(terraform_seconds, "{:.2f}"),
                fmt(terraform_seconds / r["n"] * 1000 if terraform_seconds else None, "{:.2f}"),
            )
        )
    print(
        table(
            (
                "N",
                "trainform s",
                "s per 1,000",
                "journal s",
                "compactions / s",
                "worker MB",
                "terraform s",
                "tf s per 1,000",
            ),
            rows,
        )
    )

    targets: dict[str, Any] = {}
    print()
    at_target = next((r for r in plan_results if r["n"] == TARGET_SIZE), None)
    if at_target is not None:
        worst_mb = max(peak(at_target, "trainform-empty"), peak(at_target, "trainform-changed"))
        targets["memory"] = {"peak_mb": worst_mb, "met": worst_mb < TARGET_PEAK_MB}
        print(
            f"target: trainform plan under {TARGET_PEAK_MB:.0f} MB at N={TARGET_SIZE:,} -> "
            f"{'met' if worst_mb < TARGET_PEAK_MB else 'NOT met'} ({worst_mb:.0f} MB)"
        )
        if "ratio" in at_target:
            ratio = at_target["ratio"]
            targets["ratio"] = {"ratio": ratio, "met": ratio >= TARGET_RATIO}
            print(
                f"target: trainform plan {TARGET_RATIO:.0f}x faster than terraform at "
                f"N={TARGET_SIZE:,} -> {'met' if ratio >= TARGET_RATIO else 'NOT met'} "
                f"({ratio:.1f}x empty state, {at_target['ratio_changed']:.1f}x 1% changed)"
            )
    for label, name, results in (
        ("plan (empty state)", "trainform-empty", plan_results),
        ("plan (1% changed)", "trainform-changed", plan_results),
        ("apply", "trainform", [r for r in apply_results if r["n"] in args.sizes]),
    ):
        points = [(r["n"], r[name]["median_seconds"]) for r in results]
        met, text = linear_verdict(points)
        targets[f"linear {label}"] = {"met": met, "detail": text, "steps": marginal(points)}
        verdict = "n/a" if met is None else "met" if met else "NOT met"
        print(f"target: linear growth of {label} -> {verdict} ({text})")

    report = {
        "benchmark": "plan",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "state_filesystem": filesystem(out),
        },
        "revision": git_revision(),
        "terraform": terraform_note,
        "repeat": args.repeat,
        "terraform_slow_repeat": args.terraform_slow_repeat,
        "seed": args.seed,
        "changed_share": args.changed,
        "parallelism": PARALLELISM,
        "target": {
            "size": TARGET_SIZE,
            "ratio": TARGET_RATIO,
            "peak_mb": TARGET_PEAK_MB,
            "linear_tolerance": LINEAR_TOLERANCE,
        },
        "targets": targets,
        "plan": plan_results,
        "apply": apply_results,
    }
    path = out / "plan.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"load average: {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"raw numbers: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
