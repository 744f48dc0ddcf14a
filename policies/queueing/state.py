"""Capacity bookkeeping of a simulation: pools, queues on pools, cohorts, pending jobs.

Used only by `simulator.py`. Every figure is kept incrementally (one update per admission
or release), so whether a job fits is O(1):

- a `Slot` is one queue on one pool: its nominal quota, the most it may use
  (`limit` = nominal + borrowing limit in a cohort, nominal outside one), the part of its
  nominal it never lends (`guaranteed` = nominal - lending limit), its usage;
- a `CohortPool` is one cohort on one pool: `cap` is the sum of its members' lendable
  quota, `used` the sum of each member's usage above its guaranteed part (Kueue's model
  of lending limits). Invariant: used <= cap, i.e. what queues take beyond their own
  guaranteed part is exactly what the others lend, within each one's lending limit;
- a `Pool` holds its free GPUs; the physical capacity binds even if quotas exceed it.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainform.policies.queueing.platform import QueueModel
    from trainform.policies.queueing.result import JobOutcome

UNLIMITED = 1 << 62


class Pool:
    __slots__ = ("name", "capacity", "free", "queues")

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        self.free = capacity
        self.queues: list[QueueState] = []


class CohortPool:
    __slots__ = ("cap", "used", "slots")

    def __init__(self) -> None:
        self.cap = 0
        self.used = 0
        self.slots: list[Slot] = []


class Slot:
    __slots__ = (
        "queue",
        "pool",
        "nominal",
        "limit",
        "guaranteed",
        "cohort",
        "usage",
        "running",
        "by_priority",
        "most",
    )

    def __init__(self, queue: QueueState, pool: Pool, nominal: int, limit: int, guaranteed: int):
        self.queue = queue
        self.pool = pool
        self.nominal = nominal
        self.limit = limit
        self.guaranteed = guaranteed
        self.cohort: CohortPool | None = None
        self.usage = 0
        self.running: dict[int, SimJob] = {}
        self.by_priority: dict[int, int] = defaultdict(int)
        self.most = 0  # most_ever(), set once the platform is built

    def headroom(self) -> int:
        """Most GPUs one more job could take here now (pool, queue limit, cohort)."""
        room = self.pool.free
        if self.limit - self.usage < room:
            room = self.limit - self.usage
        cohort = self.cohort
        if cohort is not None:
            shared = cohort.cap - cohort.used
            if self.usage < self.guaranteed:
                shared += self.guaranteed - self.usage
            if shared < room:
                room = shared
        return room

    def most_ever(self) -> int:
        """Largest job this slot could ever admit, on an otherwise idle platform."""
        most = min(self.pool.capacity, self.limit)
        if self.cohort is not None:
            most = min(most, self.cohort.cap + self.guaranteed)
        return most


class SimJob:
    """A job during the simulation; `key` orders it in its queue (priority, then submit)."""

    __slots__ = (
        "seq",
        "id",
        "project",
        "queue",
        "gpus",
        "priority",
        "submit",
        "remaining",
        "key",
        "slot",
        "started",
        "epoch",
        "token",
        "pending",
        "outcome",
    )

    def __init__(
        self, seq: int, queue: QueueState, priority: int, remaining: float, outcome: JobOutcome
    ) -> None:
        self.seq = seq
        self.id = outcome.id
        self.project = outcome.project
        self.queue = queue
        self.gpus = outcome.gpus
        self.priority = priority
        self.submit = outcome.submit
        self.remaining = remaining
        self.key = (-priority, outcome.submit, seq)
        self.slot: Slot | None = None
        self.started = 0.0
        self.epoch = 0
        self.token = 0
        self.pending = False
        self.outcome = outcome


class QueueState:
    """One queue during the simulation: its slots, pending jobs and project usage."""

    __slots__ = (
        "index",
        "model",
        "slots",
        "strict",
        "heap",
        "buckets",
        "size_counts",
        "pending_count",
        "project_usage",
        "project_running",
        "caps",
        "weight",
        "preempts",
        "self_blocked",
        "project_pending",
        "held",
        "held_since",
    )

    def __init__(self, index: int, model: QueueModel) -> None:
        self.index = index
        self.model = model
        self.slots: list[Slot] = []
        self.strict = model.queueing_strategy == "StrictFIFO"
        self.heap: list[tuple[tuple[int, float, int], int, SimJob]] = []
        # BestEffortFIFO: project -> (ascending sizes, size -> heap of its pending jobs)
        self.buckets: dict[str, tuple[list[int], dict[int, list[tuple[tuple, SimJob]]]]] = {}
        self.size_counts: dict[int, int] = defaultdict(int)
        self.pending_count = 0
        self.project_usage: dict[str, int] = defaultdict(int)
        self.project_running: dict[str, int] = defaultdict(int)
        self.caps: dict[str, tuple[int, int]] = {}  # project -> (gpus, running jobs)
        self.weight = model.fair_share_weight
        # True when its own quota (not the pool or the cohort) keeps every pending job out:
        # only its own releases and arrivals can change that.
        self.self_blocked = False
        # Pending jobs per project, and the last hold snapshot (holds.HoldLedger):
        # project -> (reason, pending jobs) since `held_since`.
        self.project_pending: dict[str, int] = defaultdict(int)
        self.held: dict[str, tuple[str, int]] = {}
        self.held_since = 0.0
        self.preempts = (
            model.within_queue != "Never"
            or model.reclaim_within_cohort != "Never"
            or model.borrow_within_cohort != "Never"
        )

    def project_allows(self, project: str, gpus: int) -> bool:
        cap = self.caps.get(project)
        if cap is None:
            return True
        return (
            self.project_usage[project] + gpus <= cap[0] and self.project_running[project] < cap[1]
        )

    def project_room(self, project: str) -> int:
        cap = self.caps.get(project)
        if cap is None:
            return UNLIMITED
        if self.project_running[project] >= cap[1]:
            return 0
        return cap[0] - self.project_usage[project]

    # -- pending jobs --------------------------------------------------------------------

    def push(self, job: SimJob, token: int) -> None:
        job.pending = True
        job.token = token
        self.pending_count += 1
        self.project_pending[job.project] += 1
        heapq.heappush(self.heap, (job.key, token, job))
        if self.strict:
            return
        entry = self.buckets.get(job.project)
        if entry is None:
            entry = self.buckets[job.project] = ([], {})
        sizes, heaps = entry
        bucket = heaps.get(job.gpus)
        if bucket is None:
            bucket = heaps[job.gpus] = []
            insort(sizes, job.gpus)
        heapq.heappush(bucket, (job.key, job))
        self.size_counts[job.gpus] += 1

    def head(self) -> SimJob | None:
        """The first pending job in queue order (highest priority, then earliest)."""
        heap = self.heap
        while heap:
            _, token, job = heap[0]
            if job.pending and job.token == token:
                return job
            heapq.heappop(heap)
        return None

    def remove(self, job: SimJob) -> None:
        """Take `job` out of the pending jobs: it is the head of its size bucket."""
        job.pending = False
        self.pending_count -= 1
        self.project_pending[job.project] -= 1
        if self.heap and self.heap[0][2] is job:
            heapq.heappop(self.heap)
        if self.strict:
            return
        sizes, heaps = self.buckets[job.project]
        bucket = heaps[job.gpus]
        popped = heapq.heappop(bucket)[1]
        assert popped is job, "a job leaves its bucket from the head only"
        if not bucket:
            del heaps[job.gpus]
            sizes.remove(job.gpus)
        self.size_counts[job.gpus] -= 1
        if not self.size_counts[job.gpus]:
            del self.size_counts[job.gpus]

    def best_fitting(self, room: int) -> SimJob | None:
        """BestEffortFIFO: the first pending job in queue order that needs at most `room`
        GPUs and that its project's quota allows."""
        if not self.size_counts or min(self.size_counts) > room:
            return None
        best: SimJob | None = None
        for project, (sizes, heaps) in self.buckets.items():
            limit = min(room, self.project_room(project))
            for size in sizes:
                if size > limit:
                    break
                candidate = heaps[size][0][1]
                if best is None or candidate.key < best.key:
                    best = candidate
        return best


def fitting_slot(job: SimJob) -> Slot | None:
    """The first of the job's queue's pools where it fits now, or None."""
    queue = job.queue
    if not queue.project_allows(job.project, job.gpus):
        return None
    for slot in queue.slots:
        if job.gpus <= slot.headroom():
            return slot
    return None


def book(job: SimJob, slot: Slot) -> None:
    """Account `job` as running on `slot`."""
    gpus = job.gpus
    usage = slot.usage
    cohort = slot.cohort
    if cohort is not None:
        guaranteed = slot.guaranteed
        cohort.used += max(0, usage + gpus - guaranteed) - max(0, usage - guaranteed)
    slot.usage = usage + gpus
    slot.pool.free -= gpus
    slot.running[job.seq] = job
    slot.by_priority[job.priority] += gpus
    queue = job.queue
    queue.project_usage[job.project] += gpus
    queue.project_running[job.project] += 1
    job.slot = slot


def release(job: SimJob) -> None:
    """Stop accounting `job` on its slot (job.slot stays set: the caller decides)."""
    slot = job.slot
    assert slot is not None
    gpus = job.gpus
    usage = slot.usage
    cohort = slot.cohort
    if cohort is not None:
        guaranteed = slot.guaranteed
        cohort.used += max(0, usage - gpus - guaranteed) - max(0, usage - guaranteed)
    slot.usage = usage - gpus
    slot.pool.free += gpus
    del slot.running[job.seq]
    slot.by_priority[job.priority] -= gpus
    queue = job.queue
    queue.project_usage[job.project] -= gpus
    queue.project_running[job.project] -= 1
