"""Discrete-event simulation of queue admission: `simulate(platform, jobs)`.

Called by the review command for the base and the head policy, and by bench/. The
semantics (Kueue's, simplified; see docs/simulation.md) in one paragraph: jobs arrive at
their submit time into their queue; whenever capacity frees up or jobs arrive, a
scheduling pass lets each affected queue nominate its first job in queue order that fits
(StrictFIFO: only its head), nominations are admitted in fair order (not borrowing before
borrowing, then lowest weighted borrowed share, then priority, then submit time), and a
queue whose head does not fit may preempt per its policy. A preempted job goes back to
its queue and later resumes with its remaining duration (checkpointed: no work lost).
Whenever a queue's pass admits nothing more, what holds each project's pending jobs back
is noted (holds.hold_reasons) and credited until the queue's next pass (holds.HoldLedger).

Invariants kept at every instant: pool usage <= capacity; a queue's usage on a pool <=
nominal + borrowing limit; each cohort lends no more than its members' lending limits;
project usage <= its Quota. Time is O((jobs + preemptions) x log) plus, per event, a
constant amount of work per queue on the pool that changed.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

from trainform.policies.queueing.holds import HoldLedger, hold_reasons
from trainform.policies.queueing.platform import PlatformModel
from trainform.policies.queueing.preemption import preempt_for
from trainform.policies.queueing.result import JobOutcome, Run, SimulationResult, summarise
from trainform.policies.queueing.state import (
    UNLIMITED,
    CohortPool,
    Pool,
    QueueState,
    SimJob,
    Slot,
    book,
    release,
)
from trainform.policies.queueing.trace import TraceJob


def simulate(platform: PlatformModel, jobs: Iterable[TraceJob]) -> SimulationResult:
    """Replay `jobs` on `platform`; deterministic: the same input gives the same result."""
    return Simulation(platform).run(list(jobs))


class Simulation:
    def __init__(self, platform: PlatformModel) -> None:
        self.pools = {name: Pool(name, gpus) for name, gpus in sorted(platform.pools.items())}
        self.queues: dict[str, QueueState] = {}
        cohorts: dict[tuple[str, str], CohortPool] = {}
        for index, name in enumerate(sorted(platform.queues)):
            model = platform.queues[name]
            queue = self.queues[name] = QueueState(index, model)
            for quota in model.pools:
                pool = self.pools.get(quota.pool)
                if pool is None:
                    pool = self.pools[quota.pool] = Pool(quota.pool, 0)
                nominal = max(0, quota.nominal)
                if model.cohort is None:
                    limit, lendable = nominal, 0
                else:
                    borrow = quota.borrowing_limit
                    limit = UNLIMITED if borrow is None else nominal + max(0, borrow)
                    lend = quota.lending_limit
                    lendable = nominal if lend is None else min(nominal, max(0, lend))
                slot = Slot(queue, pool, nominal, limit, nominal - lendable)
                if model.cohort is not None:
                    cohort = cohorts.setdefault((model.cohort, pool.name), CohortPool())
                    cohort.cap += lendable
                    cohort.slots.append(slot)
                    slot.cohort = cohort
                queue.slots.append(slot)
                if queue not in pool.queues:
                    pool.queues.append(queue)
        for queue in self.queues.values():
            for slot in queue.slots:
                slot.most = slot.most_ever()
        for (project, queue_name), quota in sorted(platform.quotas.items()):
            if queue_name in self.queues:
                self.queues[queue_name].caps[project] = (
                    UNLIMITED if quota.gpus is None else quota.gpus,
                    UNLIMITED if quota.running_jobs is None else quota.running_jobs,
                )
        self.order = sorted(self.queues.values(), key=lambda queue: queue.index)
        self.dirty: set[int] = set()
        self.events: list[tuple[float, int, int, SimJob]] = []
        self.tokens = 0
        self.ledger = HoldLedger()
        self.now = 0.0

    # -- the event loop --------------------------------------------------------------------

    def run(self, trace: list[TraceJob]) -> SimulationResult:
        outcomes: list[JobOutcome] = []
        reasons: dict[str, str] = {}
        arrivals: list[SimJob] = []
        for seq, job in enumerate(trace):
            queue = self.queues.get(job.queue)
            priority = job.priority
            if priority is None:
                priority = queue.model.default_priority if queue else 0
            outcome = JobOutcome(
                job.id,
                job.project,
                job.queue,
                float(job.submit),
                job.gpus,
                float(job.duration),
                priority,
            )
            outcomes.append(outcome)
            reason = self.never_reason(job, queue)
            if reason:
                reasons[job.id] = reason
                continue
            assert queue is not None
            arrivals.append(SimJob(seq, queue, priority, job.duration, outcome))
        arrivals.sort(key=lambda job: (job.submit, job.seq))
        events = self.events
        next_arrival, total = 0, len(arrivals)
        while next_arrival < total or events:
            now = arrivals[next_arrival].submit if next_arrival < total else math.inf
            if events and events[0][0] <= now:
                now = events[0][0]
            while events and events[0][0] <= now:
                _, _, epoch, job = heapq.heappop(events)
                if job.epoch == epoch:
                    self.complete(job, now)
            while next_arrival < total and arrivals[next_arrival].submit <= now:
                job = arrivals[next_arrival]
                next_arrival += 1
                self.enqueue(job)
            self.schedule(now)
            self.now = now
        for queue in self.order:
            self.ledger.credit(queue, self.now)
            while (job := queue.head()) is not None:
                queue.remove(job)
                reasons[job.id] = "still pending when every other job had finished"
        capacity = {name: p.capacity for name, p in self.pools.items()}
        return summarise(outcomes, reasons, capacity, self.ledger.result())

    def never_reason(self, job: TraceJob, queue: QueueState | None) -> str:
        if queue is None:
            return f"queue {job.queue!r} is not defined"
        most = max((slot.most_ever() for slot in queue.slots), default=0)
        if job.gpus > most:
            where = ", ".join(f"{slot.pool.name}: {slot.most_ever()}" for slot in queue.slots)
            return (
                f"asks {job.gpus} GPUs; queue {job.queue!r} can admit at most {most} "
                f"(capacity within nominal quota, borrowing and lending limits per pool: {where})"
            )
        cap = queue.caps.get(job.project)
        if cap is None and queue.model.requires_quota:
            return (
                f"project {job.project!r} has no Quota on queue {job.queue!r}: its namespace "
                "has no LocalQueue there, so Kueue never admits its jobs"
            )
        if cap is not None and job.gpus > cap[0]:
            return (
                f"asks {job.gpus} GPUs; project {job.project!r} may use at most {cap[0]} "
                f"on queue {job.queue!r} (its Quota)"
            )
        if cap is not None and cap[1] < 1:
            return f"project {job.project!r} may run no job on queue {job.queue!r} (its Quota)"
        return ""

    def enqueue(self, job: SimJob) -> None:
        self.tokens += 1
        job.queue.push(job, self.tokens)
        self.dirty.add(job.queue.index)

    def complete(self, job: SimJob, now: float) -> None:
        slot = job.slot
        assert slot is not None
        job.outcome.runs.append(Run(job.started, now, slot.pool.name))
        job.outcome.end = now
        job.remaining = 0.0
        release(job)
        self.touch(slot)

    def touch(self, slot: Slot) -> None:
        """Capacity freed by `slot`: its queue and every queue with pending jobs on its
        pool may admit (unless only its own quota keeps it out)."""
        self.dirty.add(slot.queue.index)
        for queue in slot.pool.queues:
            if queue.pending_count and not queue.self_blocked:
                self.dirty.add(queue.index)

    # -- scheduling ----------------------------------------------------------------------

    def schedule(self, now: float) -> None:
        queues = self.order
        while self.dirty:
            current = sorted(self.dirty)
            self.dirty.clear()
            nominations: list[tuple[float, tuple[int, float, int], SimJob, Slot]] = []
            for index in current:
                queue = queues[index]
                self.ledger.credit(queue, now)
                queue.held = {}
                if queue.pending_count:
                    nomination = self.nominate(queue, now)
                    if nomination is not None:
                        nominations.append(nomination)
            nominations.sort(key=lambda item: (item[0], item[1]))
            for _, _, job, slot in nominations:
                if job.gpus <= slot.headroom() and job.queue.project_allows(job.project, job.gpus):
                    self.admit(job, slot, now)
                self.dirty.add(job.queue.index)

    def nominate(
        self, queue: QueueState, now: float
    ) -> tuple[float, tuple[int, float, int], SimJob, Slot] | None:
        head = queue.head()
        assert head is not None
        queue.self_blocked = False
        slots = queue.slots
        rooms = [slot.headroom() for slot in slots]
        room = max(rooms)
        if head.gpus <= room and queue.project_allows(head.project, head.gpus):
            slot = slots[first_at_least(rooms, head.gpus)]
            return share_after(head, slot), head.key, head, slot
        if queue.preempts:
            found = preempt_for(head)
            if found is not None:
                self.preempt(head, *found, now)
                return None
        job = None if queue.strict else queue.best_fitting(room)
        if job is None:
            need = head.gpus if queue.strict else min(queue.size_counts)
            queue.self_blocked = max(slot.limit - slot.usage for slot in slots) < need
            self.ledger.snapshot(queue, hold_reasons(queue, head))
            return None
        slot = slots[first_at_least(rooms, job.gpus)]
        return share_after(job, slot), job.key, job, slot

    def admit(self, job: SimJob, slot: Slot, now: float) -> None:
        job.queue.remove(job)
        book(job, slot)
        if slot.usage > slot.nominal:
            job.outcome.borrowed = True
            self.wake_reclaimers(slot)
        if job.outcome.start is None:
            job.outcome.start = now
            job.outcome.wait = now - job.submit
        job.started = now
        job.epoch += 1
        heapq.heappush(self.events, (now + job.remaining, job.seq, job.epoch, job))

    def preempt(self, job: SimJob, slot: Slot, victims: list[SimJob], now: float) -> None:
        """Evict `victims` (already released by preempt_for) and admit `job` on `slot`."""
        for victim in victims:
            assert victim.slot is not None
            self.dirty.add(victim.slot.queue.index)
            victim.outcome.runs.append(Run(victim.started, now, victim.slot.pool.name))
            victim.outcome.preempted += 1
            victim.remaining -= now - victim.started
            victim.slot = None
            victim.epoch += 1
            self.enqueue(victim)
        self.admit(job, slot, now)
        self.dirty.add(job.queue.index)

    def wake_reclaimers(self, slot: Slot) -> None:
        """A queue started borrowing: cohort queues that may reclaim get another look."""
        cohort = slot.cohort
        if cohort is None:
            return
        for other in cohort.slots:
            queue = other.queue
            if queue.pending_count and queue.preempts and other is not slot:
                self.dirty.add(queue.index)


def first_at_least(rooms: list[int], gpus: int) -> int:
    for index, room in enumerate(rooms):
        if gpus <= room:
            return index
    raise AssertionError("a nominated job fits some slot")


def share_after(job: SimJob, slot: Slot) -> float:
    """Borrowed GPUs of the job's queue after admitting it, over its fair-share weight."""
    borrowed = 0
    for each in job.queue.slots:
        usage = each.usage + (job.gpus if each is slot else 0)
        if usage > each.nominal:
            borrowed += usage - each.nominal
    if not borrowed:
        return 0.0
    weight = job.queue.weight
    return borrowed / weight if weight > 0 else math.inf
