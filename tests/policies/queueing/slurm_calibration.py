"""Run a seeded trace on the real Slurm test cluster and replay it in the Slurm model.

`make_trace(seed, count)` draws short jobs over two partitions: `hi` (PriorityTier 10, its
QOS allows 3 GPUs; large jobs) and `lo` (PriorityTier 1, its QOS allows 2 GPUs while the
association of its account allows 1, so the QOS limit is the one that binds; small jobs).
`run_on_cluster` creates the two partitions and QOS (unique names; with or without
`Preempt` of `lo` by `hi`), submits each job at its offset (`sleep` of its duration,
`--time=1` as its limit), waits until every job has started and the rest have finished,
cancels preempted jobs still held by Slurm's requeue delay, and reads `sacct -D` back:
per job its submission, first start and elapsed time. `simulate_run` replays exactly those
jobs (submitted when Slurm recorded them, running as long as they ran) in
`simulate_slurm`, and `compare` pairs per-queue p50/p95 waits and the start order.

The jobs come once slurmctld takes jobs on the new partitions (`until_accepted`), not
after a fixed settling time that a loaded machine can outlast.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from trainform.policies.queueing import TraceJob
from trainform.policies.queueing.result import percentile
from trainform.policies.queueing.slurm_model import (
    SlurmAssociation,
    SlurmPartition,
    SlurmPlatform,
    SlurmQos,
)
from trainform.policies.queueing.slurm_sim import simulate_slurm

from tests.services.slurm import SlurmCluster

LIMIT_MINUTES = 1
BACKFILL_INTERVAL = 2.0  # the test cluster's bf_interval (scripts/slurm-cluster.sh)
SETTLE_SECONDS = 60.0  # at most, for slurmctld to take jobs on new partitions and accounts
RELEASE_DELAY = 1.0
"""Seconds from a job's end to its GPUs' next use on the test cluster (COMPLETING state and
the pass it triggers), measured: the median gap between an end and the next start."""
HI_GPUS, LO_GPUS, LO_ACCOUNT_GPUS = 3, 2, 1


@dataclass(frozen=True)
class PlannedJob:
    key: str
    offset: float
    queue: str
    gpus: int
    seconds: int


@dataclass(frozen=True)
class Observed:
    """One job as Slurm accounted it: seconds relative to the first submission."""

    key: str
    queue: str
    gpus: int
    submit: float
    start: float
    elapsed: float


def make_trace(seed: int, count: int) -> list[PlannedJob]:
    rng = random.Random(seed)
    jobs, offset = [], 0.0
    for index in range(count):
        offset += rng.uniform(0.2, 0.9)
        high = rng.random() < 0.4
        gpus = rng.choice((2, 3) if high else (1, 1, 2))
        jobs.append(
            PlannedJob(f"j{index:02d}", round(offset, 2), "hi" if high else "lo", gpus,
                       rng.randint(1, 4))
        )  # fmt: skip
    return jobs


def _ok(cluster: SlurmCluster, *argv: str) -> str:
    result = cluster.run(list(argv))
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: {result.stdout}{result.stderr}")
    return str(result.stdout)


@contextmanager
def partitions(cluster: SlurmCluster, preemption: bool) -> Iterator[dict[str, str]]:
    """Two partitions on the node, their QOS and an account; removed afterwards."""
    tag = uuid.uuid4().hex[:6]
    names = {"hi": f"cal-hi-{tag}", "lo": f"cal-lo-{tag}", "account": f"cal-{tag}"}
    hi_qos, lo_qos = f"{names['hi']}", f"{names['lo']}"
    original = cluster.partitions_file.read_text(encoding="utf-8")
    try:
        _ok(cluster, "sacctmgr", "-i", "add", "qos", lo_qos, f"GrpTRES=gres/gpu={LO_GPUS}",
            "PreemptMode=requeue")  # fmt: skip
        extra = [f"Preempt={lo_qos}"] if preemption else []
        _ok(cluster, "sacctmgr", "-i", "add", "qos", hi_qos, f"GrpTRES=gres/gpu={HI_GPUS}",
            "PreemptMode=requeue", *extra)  # fmt: skip
        _ok(cluster, "sacctmgr", "-i", "add", "account", names["account"])
        _ok(cluster, "sacctmgr", "-i", "add", "user", "root", f"account={names['account']}",
            f"qos=normal,{hi_qos},{lo_qos}", f"GrpTRES=gres/gpu={LO_ACCOUNT_GPUS}")  # fmt: skip
        node = cluster.node_name
        cluster.partitions_file.write_text(
            original + f"PartitionName={names['hi']} Nodes={node} PriorityTier=10 MaxTime=INFINITE "
            "State=UP\n"
            + f"PartitionName={names['lo']} Nodes={node} PriorityTier=1 MaxTime=INFINITE "
            "State=UP\n",
            encoding="utf-8",
        )
        _ok(cluster, "scontrol", "reconfigure")
        until_accepted(cluster, names["account"], [(names[q], names[q]) for q in ("hi", "lo")])
        yield names
    finally:
        cluster.partitions_file.write_text(original, encoding="utf-8")
        cluster.run(["scontrol", "reconfigure"])
        cluster.run(["sacctmgr", "-i", "delete", "user", "root", f"account={names['account']}"])
        cluster.run(["sacctmgr", "-i", "delete", "account", names["account"]])
        cluster.run(["sacctmgr", "-i", "delete", "qos", hi_qos])
        cluster.run(["sacctmgr", "-i", "delete", "qos", lo_qos])


def until_accepted(cluster: SlurmCluster, account: str, targets: list[tuple[str, str]]) -> None:
    """Wait until slurmctld would take a job of `account` on each (partition, QOS) of
    `targets`: `scontrol reconfigure` reads new partitions at once, but the associations and
    QOS sacctmgr adds reach slurmctld from slurmdbd a little later, and until then sbatch
    refuses the job (`Invalid account or account/partition combination`). `sbatch
    --test-only` runs the same checks without submitting anything."""
    deadline = time.monotonic() + SETTLE_SECONDS
    for partition, qos in targets:
        while True:
            result = cluster.run(
                ["sbatch", "--test-only", "-o", "/dev/null", f"--account={account}",
                 f"--partition={partition}", f"--qos={qos}", "--gres=gpu:1", "--time=1",
                 "--wrap", "true"]
            )  # fmt: skip
            if result.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"slurmctld refuses jobs on {partition}: {result.stderr}")
            time.sleep(0.2)


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def run_on_cluster(
    cluster: SlurmCluster, trace: list[PlannedJob], names: dict[str, str]
) -> list[Observed]:
    ids: dict[str, str] = {}
    began = time.monotonic()
    for job in trace:
        delay = job.offset - (time.monotonic() - began)
        if delay > 0:
            time.sleep(delay)
        partition = names[job.queue]
        ids[job.key] = _ok(
            cluster, "sbatch", "--parsable", "-o", "/dev/null", "-J", job.key,
            f"--account={names['account']}", f"--partition={partition}",
            f"--qos={partition}", f"--gres=gpu:{job.gpus}", f"--time={LIMIT_MINUTES}",
            "--wrap", f"sleep {job.seconds}",
        ).strip().split(";")[0]  # fmt: skip
    by_id = {value: key for key, value in ids.items()}
    deadline = time.monotonic() + 180
    while True:
        rows = _accounting(cluster, ids.values())
        first = _first_runs(rows)
        finished = {r["JobID"] for r in rows if r["State"] in ("COMPLETED", "FAILED", "TIMEOUT")}
        held = [i for i in ids.values() if i in first and i not in finished]
        unstarted = [i for i in ids.values() if i not in first]
        running = [r for r in rows if r["State"] == "RUNNING"]
        if not unstarted and not running:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"jobs did not finish: {unstarted or held}")
        time.sleep(1)
    if held:
        cluster.run(["scancel", *held])
    origin = min(_epoch(rows_submit) for rows_submit in (r["Submit"] for r in first.values()))
    observed = []
    for job_id, row in first.items():
        plan = next(j for j in trace if j.key == by_id[job_id])
        completed = [r for r in rows if r["JobID"] == job_id and r["State"] == "COMPLETED"]
        elapsed = _seconds(completed[0]["Elapsed"]) if completed else float(plan.seconds)
        observed.append(
            Observed(plan.key, plan.queue, plan.gpus, _epoch(row["Submit"]) - origin,
                     _epoch(row["Start"]) - origin, max(1.0, elapsed))
        )  # fmt: skip
    return sorted(observed, key=lambda o: o.key)


def _accounting(cluster: SlurmCluster, ids: object) -> list[dict[str, str]]:
    fields = ["JobID", "State", "Submit", "Start", "Elapsed"]
    text = _ok(cluster, "sacct", "-D", "-X", "-n", "-P", "-j", ",".join(ids),  # type: ignore[arg-type]
               "-o", ",".join(fields))  # fmt: skip
    return [dict(zip(fields, line.split("|"), strict=True)) for line in text.splitlines() if line]


def _first_runs(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    """Per job id its first run: the earliest record that has a start."""
    first: dict[str, dict[str, str]] = {}
    for row in rows:
        if row["Start"] in ("Unknown", "None", ""):
            continue
        known = first.get(row["JobID"])
        if known is None or row["Start"] < known["Start"]:
            first[row["JobID"]] = row
    return first


def _seconds(elapsed: str) -> float:
    days, _, clock = elapsed.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return (int(days) if days else 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def platform_of(cluster: SlurmCluster, preemption: bool) -> SlurmPlatform:
    hi = SlurmQos("hiq", gpu_limit=HI_GPUS, preempt=("loq",) if preemption else ())
    return SlurmPlatform(
        pools={"node": cluster.gpus},
        release_delay=RELEASE_DELAY,
        backfill_interval=BACKFILL_INTERVAL,
        partitions={
            "hi": SlurmPartition("hi", "node", tier=10, qos="hiq"),
            "lo": SlurmPartition("lo", "node", tier=1, qos="loq"),
        },
        qos={"hiq": hi, "loq": SlurmQos("loq", gpu_limit=LO_GPUS)},
        associations={("acct", ""): SlurmAssociation("acct", gpu_limit=LO_ACCOUNT_GPUS)},
    )


def simulate_run(platform: SlurmPlatform, observed: list[Observed]) -> dict[str, float]:
    jobs = [
        TraceJob(o.key, o.submit, "acct", o.queue, o.gpus, o.elapsed, limit=LIMIT_MINUTES * 60.0)
        for o in observed
    ]
    result = simulate_slurm(platform, jobs)
    return {job.id: float(job.start) for job in result.jobs if job.start is not None}


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-b of two rankings (ties allowed in either)."""
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_a) * (concordant + discordant + ties_b)) ** 0.5
    return (concordant - discordant) / denominator if denominator else 1.0


@dataclass(frozen=True)
class Row:
    queue: str
    jobs: int
    real_p50: float
    sim_p50: float
    real_p95: float
    sim_p95: float

    def within(self, share: float, seconds: float) -> bool:
        return all(
            abs(sim - real) <= max(share * real, seconds)
            for real, sim in ((self.real_p50, self.sim_p50), (self.real_p95, self.sim_p95))
        )


def compare(observed: list[Observed], simulated: dict[str, float]) -> tuple[list[Row], float]:
    rows = []
    for queue in sorted({o.queue for o in observed}):
        mine = [o for o in observed if o.queue == queue]
        real = sorted(o.start - o.submit for o in mine)
        sim = sorted(simulated[o.key] - o.submit for o in mine)
        rows.append(
            Row(queue, len(mine), percentile(real, 50), percentile(sim, 50),
                percentile(real, 95), percentile(sim, 95))
        )  # fmt: skip
    keys = [o.key for o in observed]
    tau = kendall_tau([next(o.start for o in observed if o.key == k) for k in keys],
                      [simulated[k] for k in keys])  # fmt: skip
    return rows, tau


def table(title: str, rows: list[Row], tau: float) -> str:
    lines = [title, "queue  jobs  p50 real  p50 sim  p95 real  p95 sim"]
    for r in rows:
        lines.append(
            f"{r.queue:<5}  {r.jobs:>4}  {r.real_p50:>8.0f}  {r.sim_p50:>7.0f}  "
            f"{r.real_p95:>8.0f}  {r.sim_p95:>7.0f}"
        )
    lines.append(f"start order Kendall tau-b: {tau:.3f}")
    return "\n".join(lines)
