"""Which running jobs a pending job may preempt, per its queue's policy (Kueue semantics).

Called by the simulator for a queue's head job that does not fit. Candidates, for each
pool of the queue in order:

- withinQueue LowerPriority: the queue's own running jobs of lower priority
  (LowerOrNewerEqualPriority: also equal priority submitted later);
- when the job would stay within its queue's nominal quota: reclaimWithinCohort takes
  back lent quota from cohort queues that are borrowing on that pool (Any: any of their
  jobs; LowerPriority: those of lower priority);
- when it would borrow: borrowWithinCohort LowerPriority preempts lower-priority jobs
  (at or below maxPriorityThreshold when set) of cohort queues that are borrowing.

Candidates are tried other queues' jobs first, then lowest priority, then most recently
started, and removed one by one (another queue's job only while that queue still
borrows) until the job fits; then every victim that is not needed is put back (last
removed first), as Kueue minimises its victim set. Nothing is evicted when the job
cannot fit even with all candidates gone.
"""

from __future__ import annotations

from trainform.policies.queueing.state import SimJob, Slot, book, release


def preempt_for(job: SimJob) -> tuple[Slot, list[SimJob]] | None:
    """The slot `job` fits on once the returned victims are released, or None.

    On success the victims are already released from the bookkeeping (their `slot` still
    names where they ran); the caller records their eviction and admits `job`."""
    queue = job.queue
    if not queue.project_allows(job.project, job.gpus) and not _same_project_victims(job):
        return None
    for slot in queue.slots:
        if job.gpus > slot.most:
            continue
        policy = _cohort_policy(job, slot)
        if _bound(job, slot, policy) < job.gpus:
            continue
        candidates = _candidates(job, slot, policy)
        if not candidates:
            continue
        removed: list[SimJob] = []
        fits = False
        for victim in candidates:
            victim_slot = victim.slot
            assert victim_slot is not None
            if victim.queue is not queue and victim_slot.usage <= victim_slot.nominal:
                continue
            release(victim)
            removed.append(victim)
            if _fits(job, slot):
                fits = True
                break
        if not fits:
            for victim in reversed(removed):
                book(victim, victim.slot)  # type: ignore[arg-type]
            continue
        victims: list[SimJob] = []
        for victim in reversed(removed[:-1]):
            book(victim, victim.slot)  # type: ignore[arg-type]
            if not _fits(job, slot):
                release(victim)
                victims.append(victim)
        victims.append(removed[-1])
        victims.sort(key=lambda each: each.seq)
        return slot, victims
    return None


def _fits(job: SimJob, slot: Slot) -> bool:
    return job.gpus <= slot.headroom() and job.queue.project_allows(job.project, job.gpus)


def _same_project_victims(job: SimJob) -> bool:
    """A project at its Quota can only make room by preempting its own jobs."""
    return job.queue.model.within_queue != "Never"


def _cohort_policy(job: SimJob, slot: Slot) -> str:
    if slot.cohort is None:
        return "Never"
    model = job.queue.model
    if slot.usage + job.gpus <= slot.nominal:
        return model.reclaim_within_cohort
    return model.borrow_within_cohort


def _bound(job: SimJob, slot: Slot, policy: str) -> int:
    """An upper bound of the GPUs that could be available to `job` on `slot` after
    preemption: cheap, so hopeless attempts cost no scan of running jobs."""
    room = max(0, slot.headroom())
    within = job.queue.model.within_queue
    if within != "Never":
        equal = within == "LowerOrNewerEqualPriority"
        for priority, gpus in slot.by_priority.items():
            if priority < job.priority or (equal and priority == job.priority):
                room += gpus
    if policy != "Never" and slot.cohort is not None:
        for other in slot.cohort.slots:
            if other is not slot and other.usage > other.nominal:
                room += other.usage
    return room


def _candidates(job: SimJob, slot: Slot, policy: str) -> list[SimJob]:
    ranked: list[tuple[int, int, float, int, SimJob]] = []
    within = job.queue.model.within_queue
    if within != "Never":
        equal = within == "LowerOrNewerEqualPriority"
        for other in slot.running.values():
            if other.priority < job.priority or (
                equal and other.priority == job.priority and other.key > job.key
            ):
                ranked.append((1, other.priority, -other.started, -other.seq, other))
    if policy != "Never" and slot.cohort is not None:
        threshold = job.queue.model.borrow_max_priority
        reclaiming = slot.usage + job.gpus <= slot.nominal
        for member in slot.cohort.slots:
            if member is slot or member.usage <= member.nominal:
                continue
            for other in member.running.values():
                if policy == "Any" or (
                    other.priority < job.priority
                    and (reclaiming or threshold is None or other.priority <= threshold)
                ):
                    ranked.append((0, other.priority, -other.started, -other.seq, other))
    ranked.sort(key=lambda item: item[:4])
    return [item[4] for item in ranked]
