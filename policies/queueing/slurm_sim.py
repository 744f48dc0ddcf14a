"""Discrete-event simulation of Slurm's scheduling: `simulate_slurm(platform, jobs)`.

The model of slurmctld (sched/backfill, priority/multifactor, preempt/qos), per pass:

1. Pending, eligible jobs in Slurm's order: partition PriorityTier (higher first), then the
   multifactor priority (age, partition, QOS, job size, from `SlurmWeights`), then
   submission order.
2. Main scheduler, in that order: a job over a limit is skipped: its QOS's GrpTRES
   gres/gpu, GrpJobs, MaxTRESPerUser gres/gpu, MaxJobsPerUser (a partition QOS's limit
   winning over the job's own QOS's), then each association up its tree (GrpTRES gres/gpu
   unless a QOS sets one, GrpJobs, and the nearest MaxJobs per user unless the QOS sets
   MaxJobsPerUser). A job that fits the free GPUs of its pool starts, unless a job before
   it was blocked on that pool: then the pool's nodes are taken out of this pass (Slurm's
   main scheduler does the same, so a small job never overtakes a blocked one there). A job that
   does not fit may preempt running jobs of the QOS its QOS lists (lowest QOS priority,
   then most recently started first, until it fits): requeued victims lose the work since
   their last checkpoint and wait out the requeue delay; cancelled ones end.
3. Backfill, at multiples of `backfill_interval`: the first `backfill_depth` jobs still
   pending are planned in order on a profile of free GPUs over time (running jobs end at
   start + time limit; planned ends rounded up to `backfill_resolution`). A job starts now
   when it fits now without touching an earlier job's reservation; otherwise it reserves
   whole nodes from the earliest time it fits. So lower-priority jobs fill gaps only where
   they delay no higher one, within the time limits the scheduler knows.

A job's GPUs are released `release_delay` seconds after it ends (Slurm's COMPLETING
state). A pass runs at every arrival, release and requeue eligibility. What held each pending
job back is credited until the next pass (holds). Returns a `SimulationResult` like the
Kueue model's. The whole model and its limits are in docs/simulation.md.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from trainform.policies.queueing import holds
from trainform.policies.queueing.result import JobOutcome, Run, SimulationResult, summarise
from trainform.policies.queueing.slurm_model import (
    SlurmAssociation,
    SlurmPartition,
    SlurmPlatform,
    SlurmQos,
)
from trainform.policies.queueing.trace import TraceJob


@dataclass(eq=False)
class _Job:
    seq: int
    trace: TraceJob
    outcome: JobOutcome
    partition: str
    pool: str
    qos: SlurmQos | None
    limits: dict[str, SlurmQos]
    """Per QOS limit (SlurmQos field name), the QOS that sets it for this job: its
    partition's QOS first, then its own (Slurm: a partition QOS limit wins)."""
    counted: tuple[SlurmQos, ...]
    """The QOS whose usage the job counts in (partition QOS and its own, once each)."""
    remaining: float
    limit: float
    eligible: float
    tier: int
    started: float = 0.0
    epoch: int = 0
    running: bool = False
    done: bool = False
    key: tuple[int, float, int] = (0, 0.0, 0)
    reason: str = ""


@dataclass
class _Usage:
    pool_free: dict[str, int]
    qos_gpus: Counter[str] = field(default_factory=Counter)
    qos_jobs: Counter[str] = field(default_factory=Counter)
    assoc_gpus: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    assoc_jobs: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    user_gpus: Counter[tuple[str, str]] = field(default_factory=Counter)
    """By (QOS, user)."""
    user_jobs: Counter[tuple[str, str]] = field(default_factory=Counter)
    """By (QOS, user)."""
    account_user_jobs: Counter[tuple[str, str]] = field(default_factory=Counter)
    """By (account, user): what an association's MaxJobs counts."""


def simulate_slurm(platform: SlurmPlatform, jobs: Iterable[TraceJob]) -> SimulationResult:
    """Replay `jobs` on `platform` as Slurm would schedule them; deterministic."""
    return _SlurmSimulation(platform).run(list(jobs))


class _SlurmSimulation:
    def __init__(self, platform: SlurmPlatform) -> None:
        self.platform = platform
        self.usage = _Usage(dict(platform.pools))
        # Pending jobs per pool in Slurm's order; requeued jobs wait in `delayed` first.
        self.queued: dict[str, list[tuple[tuple[int, float, int], _Job]]] = defaultdict(list)
        self.delayed: list[tuple[float, int, _Job]] = []
        self.running: list[_Job] = []
        self.events: list[tuple[float, int, int, _Job]] = []
        self.wakeups: list[float] = []
        self.held: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.snapshot: Counter[tuple[str, str, str]] = Counter()
        self.last = 0.0
        self.reasons: dict[str, str] = {}
        qos_priorities = [q.priority for q in platform.qos.values()] or [0]
        factors = [p.job_factor for p in platform.partitions.values()] or [1]
        self.max_qos = max(1, max(qos_priorities))
        self.max_factor = max(1, max(factors))
        self.total_gpus = max(1, sum(platform.pools.values()))

    # -- set-up ------------------------------------------------------------------------

    def _admit_trace(self, trace: list[TraceJob]) -> tuple[list[JobOutcome], list[_Job]]:
        outcomes, arrivals = [], []
        for seq, job in enumerate(trace):
            partition = self.platform.partitions.get(job.queue)
            qos = self._qos_of(job, partition)
            counted = self._counted(partition, qos)
            limits = _limits(counted)
            outcome = JobOutcome(
                job.id, job.project, job.queue, float(job.submit), job.gpus,
                float(job.duration), 0 if partition is None else partition.tier,
            )  # fmt: skip
            outcomes.append(outcome)
            reason = self._never_reason(job, partition, limits)
            if reason:
                self.reasons[job.id] = reason
                continue
            assert partition is not None
            limit = float(job.limit) if job.limit else float(job.duration)
            seen = float(job.submit)
            interval = self.platform.sched_interval
            if interval > 0:
                seen = math.ceil(seen / interval) * interval
            arrivals.append(
                _Job(seq, job, outcome, partition.name, partition.pool, qos, limits, counted,
                     float(job.duration), limit, seen, partition.tier)
            )  # fmt: skip
        return outcomes, arrivals

    def _qos_of(self, job: TraceJob, partition: SlurmPartition | None) -> SlurmQos | None:
        """The job's own QOS when the platform knows it, else its partition's QOS."""
        if job.qos and job.qos in self.platform.qos:
            return self.platform.qos[job.qos]
        return self.platform.qos.get(partition.qos) if partition and partition.qos else None

    def _counted(
        self, partition: SlurmPartition | None, qos: SlurmQos | None
    ) -> tuple[SlurmQos, ...]:
        own = self.platform.qos.get(partition.qos) if partition and partition.qos else None
        return tuple(q for q in dict.fromkeys((own, qos)) if q is not None)

    def _never_reason(
        self, job: TraceJob, partition: SlurmPartition | None, limits: dict[str, SlurmQos]
    ) -> str:
        if partition is None:
            return f"partition {job.queue!r} is not defined"
        capacity = self.platform.pools.get(partition.pool, 0)
        if job.gpus > capacity:
            return f"asks {job.gpus} GPUs; the partition's nodes have {capacity}"
        for field_name, what in (("gpu_limit", "GrpTRES"), ("user_gpu_limit", "MaxTRESPerUser")):
            qos = limits.get(field_name)
            limit = getattr(qos, field_name, None)
            if qos and limit is not None and job.gpus > limit and (what == "GrpTRES" or job.user):
                return f"asks {job.gpus} GPUs; QOS {qos.name} {what} allows {limit}"
        for field_name in ("max_jobs", "user_max_jobs"):
            qos = limits.get(field_name)
            if qos and getattr(qos, field_name) == 0 and (field_name == "max_jobs" or job.user):
                return f"QOS {qos.name} allows no running job"
        for association in self.platform.chain(job.project, job.user, job.queue):
            where = _where(association)
            limit = association.gpu_limit
            if "gpu_limit" not in limits and limit is not None and job.gpus > limit:
                return f"asks {job.gpus} GPUs; GrpTRES of {where} allows {limit}"
            if association.max_jobs == 0:
                return f"GrpJobs of {where} allows no running job"
        return ""

    # -- the event loop ----------------------------------------------------------------

    def run(self, trace: list[TraceJob]) -> SimulationResult:
        outcomes, arrivals = self._admit_trace(trace)
        arrivals.sort(key=lambda job: (job.eligible, job.seq))
        index, total = 0, len(arrivals)
        while index < total or self.events or self.wakeups or self.delayed:
            now = arrivals[index].eligible if index < total else math.inf
            for heap in (self.events, self.wakeups, self.delayed):
                if heap:
                    now = min(now, heap[0][0] if isinstance(heap[0], tuple) else heap[0])
            self._credit(now)
            while self.events and self.events[0][0] <= now:
                _, _, epoch, job = heapq.heappop(self.events)
                if job.epoch == epoch and job.running:
                    self._finish(job, now)
            while self.wakeups and self.wakeups[0] <= now:
                heapq.heappop(self.wakeups)
            while self.delayed and self.delayed[0][0] <= now:
                self._enqueue(heapq.heappop(self.delayed)[2])
            while index < total and arrivals[index].eligible <= now:
                self._enqueue(arrivals[index])
                index += 1
            self._schedule(now)
        for queue in self.queued.values():
            for _, job in queue:
                self.reasons[job.trace.id] = "still pending when every other job had finished"
        capacity = dict(self.platform.pools)
        held = {key: dict(value) for key, value in sorted(self.held.items())}
        return summarise(outcomes, self.reasons, capacity, held)

    def _credit(self, now: float) -> None:
        elapsed = now - self.last
        if elapsed > 0:
            for (project, queue, reason), count in self.snapshot.items():
                self.held[(project, queue)][reason] += elapsed * count
        self.last = now

    # -- one scheduling pass -----------------------------------------------------------

    def _priority(self, job: _Job, now: float) -> float:
        weights = self.platform.weights
        value = 0.0
        if weights.age:
            age = max(0.0, now - job.trace.submit)
            value += weights.age * min(1.0, age / weights.max_age)
        if weights.partition:
            factor = self.platform.partitions[job.partition].job_factor
            value += weights.partition * factor / self.max_factor
        if weights.qos and job.qos is not None:
            value += weights.qos * job.qos.priority / self.max_qos
        if weights.job_size:
            value += weights.job_size * job.trace.gpus / self.total_gpus
        return value

    def _enqueue(self, job: _Job) -> None:
        job.key = (-job.tier, -self._priority(job, job.eligible), job.seq)
        bisect.insort(self.queued[job.pool], (job.key, job))
        self._set_reason(job, holds.ORDER)

    def _set_reason(self, job: _Job, reason: str) -> None:
        """What holds `job` now ("" once it runs); the snapshot counts jobs per reason."""
        if job.reason == reason:
            return
        where = (job.trace.project, job.trace.queue)
        if job.reason:
            old = (*where, job.reason)
            self.snapshot[old] -= 1
            if not self.snapshot[old]:
                del self.snapshot[old]
        if reason:
            self.snapshot[(*where, reason)] += 1
        job.reason = reason

    def _schedule(self, now: float) -> None:
        """One pass per pool, over at most `scan_depth` jobs in order (a job deeper keeps
        its last reason, as Slurm's deeper jobs keep `Reason=Priority`)."""
        aging = self.platform.weights.age > 0
        backfill: dict[str, list[_Job]] = {}
        for pool, queue in self.queued.items():
            if not queue:
                continue
            if aging:
                for index, (_, job) in enumerate(queue):
                    job.key = (-job.tier, -self._priority(job, now), job.seq)
                    queue[index] = (job.key, job)
                queue.sort(key=lambda item: item[0])
            blocked, waiting, index, scanned = False, [], 0, 0
            while index < len(queue) and scanned < self.platform.scan_depth:
                job = queue[index][1]
                scanned += 1
                limit = self._limit_reason(job)
                if limit:
                    self._set_reason(job, limit)
                    index += 1
                    continue
                free = self.usage.pool_free[pool]
                if not blocked and (job.trace.gpus <= free or self._preempt_for(job, now)):
                    del queue[index]
                    self._start(job, now)
                    continue
                self._set_reason(job, holds.ORDER if job.trace.gpus <= free else holds.POOL)
                blocked = True
                waiting.append(job)
                index += 1
                if free == 0 and len(waiting) >= self.platform.backfill_depth:
                    break
            if blocked:
                backfill[pool] = waiting
        if backfill and self.platform.backfill and self._backfill_tick(now):
            for waiting in backfill.values():
                self._backfill(now, waiting)

    def _backfill_tick(self, now: float) -> bool:
        """Whether a backfill pass runs now; if not, one is due at the next tick."""
        interval = self.platform.backfill_interval
        if interval <= 0:
            return True
        ticks = now / interval
        if abs(ticks - round(ticks)) < 1e-9:
            return True
        heapq.heappush(self.wakeups, math.ceil(ticks) * interval)
        return False

    def _limit_reason(self, job: _Job) -> str:
        usage, gpus, user, limits = self.usage, job.trace.gpus, job.trace.user, job.limits
        for name, used, extra in (
            ("gpu_limit", usage.qos_gpus, gpus),
            ("max_jobs", usage.qos_jobs, 1),
            ("user_gpu_limit", usage.user_gpus, gpus),
            ("user_max_jobs", usage.user_jobs, 1),
        ):
            qos, per_user = limits.get(name), name.startswith("user")
            if qos is None or (per_user and not user):
                continue
            key = (qos.name, user) if per_user else qos.name
            if used[key] + extra > getattr(qos, name):  # type: ignore[index]
                return holds.QOS_LIMIT
        qos_sets_gpus = "gpu_limit" in limits
        chain = self.platform.chain(job.trace.project, user, job.partition)
        for association in chain:
            key, limit = association.key, association.gpu_limit
            if not qos_sets_gpus and limit is not None and usage.assoc_gpus[key] + gpus > limit:
                return holds.GPU_QUOTA
            if association.max_jobs is not None and usage.assoc_jobs[key] >= association.max_jobs:
                return holds.RUNNING_CAP
        per_user = next((a.user_max_jobs for a in chain if a.user_max_jobs is not None), None)
        shadowed = "user_max_jobs" in limits
        if user and per_user is not None and not shadowed:
            if usage.account_user_jobs[(job.trace.project, user)] >= per_user:
                return holds.RUNNING_CAP
        return ""

    def _book(self, job: _Job, sign: int) -> None:
        usage, gpus, user = self.usage, job.trace.gpus * sign, job.trace.user
        usage.pool_free[job.pool] -= gpus
        for qos in job.counted:
            usage.qos_gpus[qos.name] += gpus
            usage.qos_jobs[qos.name] += sign
            if user:
                usage.user_gpus[(qos.name, user)] += gpus
                usage.user_jobs[(qos.name, user)] += sign
        for association in self.platform.chain(job.trace.project, user, job.partition):
            usage.assoc_gpus[association.key] += gpus
            usage.assoc_jobs[association.key] += sign
        if user:
            usage.account_user_jobs[(job.trace.project, user)] += sign

    def _start(self, job: _Job, now: float) -> None:
        """Run `job` (already taken out of its pool's queue)."""
        self._set_reason(job, "")
        self.running.append(job)
        self._book(job, 1)
        job.running, job.started = True, now
        job.epoch += 1
        outcome = job.outcome
        if outcome.start is None:
            outcome.start, outcome.wait = now, now - outcome.submit
        release = now + job.remaining + self.platform.release_delay
        heapq.heappush(self.events, (release, job.seq, job.epoch, job))

    def _finish(self, job: _Job, now: float) -> None:
        self.running.remove(job)
        self._book(job, -1)
        job.running, job.done = False, True
        end = now - self.platform.release_delay
        job.outcome.runs.append(Run(job.started, end, job.pool))
        job.outcome.end = end

    def _preempt_for(self, job: _Job, now: float) -> bool:
        """Preempt running jobs of the QOS that `job`'s QOS may preempt until it fits: only
        jobs of another QOS that come after `job` in Slurm's order (a mutual or circular
        Preempt list cannot make two jobs evict each other for ever)."""
        qos = job.qos
        if qos is None or not qos.preempt:
            return False
        candidates = [
            other
            for other in self.running
            if other.pool == job.pool
            and other.qos is not None
            and other.qos.name in qos.preempt
            and other.qos.preempt_mode != "off"
            and other.qos.name != qos.name
            and other.key > job.key
        ]
        candidates.sort(key=lambda other: (other.qos.priority, -other.started, -other.seq))  # type: ignore[union-attr]
        free, victims = self.usage.pool_free[job.pool], []
        for other in candidates:
            if free >= job.trace.gpus:
                break
            victims.append(other)
            free += other.trace.gpus
        if free < job.trace.gpus:
            return False
        for victim in victims:
            self._evict(victim, now)
        return True

    def _evict(self, victim: _Job, now: float) -> None:
        self.running.remove(victim)
        self._book(victim, -1)
        victim.running = False
        victim.epoch += 1
        outcome = victim.outcome
        outcome.runs.append(Run(victim.started, now, victim.pool))
        outcome.preempted += 1
        assert victim.qos is not None
        if victim.qos.preempt_mode == "cancel":
            outcome.end = None
            self.reasons[victim.trace.id] = "cancelled by preemption (PreemptMode=CANCEL)"
            return
        ran = now - victim.started
        interval = self.platform.checkpoint_interval
        saved = math.floor(ran / interval) * interval if interval else 0.0
        victim.remaining -= min(saved, victim.remaining)
        victim.eligible = now + self.platform.requeue_delay
        heapq.heappush(self.delayed, (victim.eligible, victim.seq, victim))
        self._set_reason(victim, holds.REQUEUE_DELAY)

    # -- backfill ----------------------------------------------------------------------

    def _backfill(self, now: float, waiting: list[_Job]) -> None:
        """Conservative backfill of one pool on a free-GPU profile (time -> free GPUs)."""
        profile = self._profile(waiting[0].pool, now)
        queue = self.queued[waiting[0].pool]
        for job in waiting[: self.platform.backfill_depth]:
            resolution = self.platform.backfill_resolution
            length = job.limit
            if resolution > 0:
                length = math.ceil((now + job.limit) / resolution) * resolution - now
            start = _earliest(profile, job.trace.gpus, length)
            fits = job.trace.gpus <= self.usage.pool_free[job.pool]
            if start <= now and fits and not self._limit_reason(job):
                queue.remove((job.key, job))
                self._start(job, now)
            _reserve(profile, start, start + length, self._nodes_of(job))

    def _nodes_of(self, job: _Job) -> int:
        """The GPUs of the whole nodes a reservation for `job` holds."""
        per_node = self.platform.node_gpus.get(job.pool) or self.platform.pools[job.pool]
        return math.ceil(job.trace.gpus / per_node) * per_node

    def _profile(self, pool: str, now: float) -> list[list[float]]:
        """[[time, free GPUs from then on], ...] from the running jobs' time limits."""
        ends: Counter[float] = Counter()
        for job in self.running:
            if job.pool == pool:
                end = job.started + job.limit
                if end <= now:  # over its limit (a trace may say so): until it really ends
                    end = job.started + job.remaining + self.platform.release_delay
                ends[max(now, end)] += job.trace.gpus
        profile = [[now, float(self.usage.pool_free[pool])]]
        free = profile[0][1]
        for time in sorted(ends):
            free += ends[time]
            if time <= now:
                profile[0][1] = free
            else:
                profile.append([time, free])
        return profile


QOS_LIMITS = ("gpu_limit", "max_jobs", "user_gpu_limit", "user_max_jobs")


def _limits(counted: tuple[SlurmQos, ...]) -> dict[str, SlurmQos]:
    """Per QOS limit, the first of `counted` that sets it."""
    chosen: dict[str, SlurmQos] = {}
    for qos in counted:
        for name in QOS_LIMITS:
            if name not in chosen and getattr(qos, name) is not None:
                chosen[name] = qos
    return chosen


def _where(association: SlurmAssociation) -> str:
    what = f"user {association.user} in account" if association.user else "account"
    on = f" on partition {association.partition}" if association.partition else ""
    return f"the association of {what} {association.account}{on}"


def _earliest(profile: list[list[float]], gpus: int, length: float) -> float:
    """The first breakpoint from which `gpus` stay free for `length` seconds (one scan: a
    start whose window holds a point that is too full is skipped past that point)."""
    count, index = len(profile), 0
    while index < count:
        end = profile[index][0] + length
        probe = index
        while probe < count and profile[probe][0] < end and profile[probe][1] >= gpus:
            probe += 1
        if probe == count or profile[probe][0] >= end:
            return profile[index][0]
        index = probe + 1
    return profile[-1][0]


def _reserve(profile: list[list[float]], start: float, end: float, gpus: int) -> None:
    """Take `gpus` from the profile over [start, end), adding breakpoints at both edges."""
    for edge in (start, end):
        at = bisect.bisect_left(profile, edge, key=lambda point: point[0])
        if at == len(profile) or profile[at][0] != edge:
            profile.insert(at, [edge, profile[at - 1][1] if at else profile[0][1]])
    first = bisect.bisect_left(profile, start, key=lambda point: point[0])
    last = bisect.bisect_left(profile, end, key=lambda point: point[0])
    for point in profile[first:last]:
        point[1] -= gpus
