"""apply_plan: execute a plan against providers, recording every step durably.

The walk follows `apply_graph`: a change starts once everything it waits for succeeded;
a failure skips only what depends on it, independent branches finish. At most
`parallelism` provider calls run at once. Before each mutating call a journal intent is
recorded, after it the outcome, so a crash leaves a pending record that the next plan
resolves by observing. Transient provider errors are retried with backoff. On Ctrl-C no
new change starts, calls in flight finish, state is saved and the run ends non-zero.
"""

from __future__ import annotations

import enum
import heapq
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from trainform.planner.backends.base import StateBackend
from trainform.planner.code_changes import recorded_code_files
from trainform.planner.errors import PlannerError
from trainform.planner.lineage import provenance, record_evaluation_inputs, spec_commit
from trainform.planner.lockfile import local_roots
from trainform.planner.plan import apply_graph, tool_version
from trainform.planner.plan_model import Action, Plan, ResourceChange, StalePlanError
from trainform.planner.session import ProviderSet
from trainform.planner.state import ResourceState, State
from trainform.providers.base import DesiredResource
from trainform.providers.errors import PermanentProviderError, ProviderError, TransientProviderError
from trainform.providers.jobs import DatasetInput, JobLaunch, JobProvider


class OutcomeStatus(enum.StrEnum):
    APPLIED = "applied"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_STARTED = "not started"


@dataclass
class Outcome:
    address: str
    action: Action
    status: OutcomeStatus
    message: str = ""
    seconds: float = 0.0


@dataclass
class ApplyResult:
    outcomes: list[Outcome] = field(default_factory=list)
    interrupted: bool = False
    lineage: str | None = None
    serial: int = 0
    """The state's lineage and serial once the apply ended (what it compacted)."""

    @property
    def failed(self) -> bool:
        return self.interrupted or any(o.status is not OutcomeStatus.APPLIED for o in self.outcomes)

    def count(self, status: OutcomeStatus) -> int:
        return sum(1 for o in self.outcomes if o.status is status)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0


Event = Callable[[str, ResourceChange, str], None]


def check_fresh(plan: Plan, state: State | None, location: str) -> None:
    if plan.tool_version != tool_version():
        raise StalePlanError(
            f"cannot apply plan {location}: made by trainform {plan.tool_version}, this is "
            f"{tool_version()}. Create a new plan"
        )
    if plan.lineage is None:
        if state is not None and state.resources:
            raise StalePlanError(
                f"cannot apply plan {location}: it was made before any state existed, but "
                f"state now exists (serial {state.serial}). Create a new plan"
            )
        return
    if state is None or state.lineage != plan.lineage:
        raise StalePlanError(
            f"cannot apply plan {location}: it belongs to state lineage {plan.lineage}, but "
            f"the state is {state.lineage if state else 'missing'}. Create a new plan"
        )
    if state.serial != plan.serial:
        raise StalePlanError(
            f"cannot apply plan {location}: state changed since the plan was made (serial "
            f"{plan.serial} -> {state.serial}). Create a new plan"
        )


class _Walk:
    def __init__(
        self,
        plan: Plan,
        state: State,
        backend: StateBackend,
        providers: ProviderSet,
        retry: RetryPolicy,
        on_event: Event | None,
    ) -> None:
        self.plan = plan
        self.state = state
        self.backend = backend
        self.providers = providers
        self.retry = retry
        self.on_event = on_event
        self.record_lock = threading.Lock()
        self.local = threading.local()
        self._commit: str | None = None

    def commit(self) -> str:
        """The spec folder's commit, read once per apply (call with record_lock held)."""
        if self._commit is None:
            self._commit = spec_commit(self.providers.context.spec_root)
        return self._commit

    def record(self, entry: dict[str, Any]) -> None:
        with self.record_lock:
            self.backend.record(self.state, entry)

    def event(self, kind: str, change: ResourceChange, detail: str = "") -> None:
        if self.on_event is not None:
            self.on_event(kind, change, detail)

    def call(self, function: Callable[[], Any]) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                result = function()
                self.local.changed = True
                return result
            except TransientProviderError as exc:
                if attempt >= self.retry.attempts:
                    raise
                delay = exc.retry_after
                if delay is None:
                    delay = min(self.retry.max_delay, self.retry.base_delay * 2 ** (attempt - 1))
                time.sleep(delay)

    def desired(self, change: ResourceChange) -> DesiredResource:
        parts = change.address.split("/")
        with self.record_lock:
            dependency_outputs = {
                d: dict(self.state.resources[d].outputs)
                for d in change.dependencies
                if d in self.state.resources
            }
        return DesiredResource(
            address=change.address,
            kind=change.kind,
            name=parts[-1],
            project=parts[1] if len(parts) == 3 else None,
            document=change.after or {},
            outputs_of_dependencies=dependency_outputs,
        )

    def execute(self, change: ResourceChange) -> None:
        with self.record_lock:
            previous = self.state.resources.get(change.address)
        outputs: dict[str, Any] = dict(previous.outputs) if previous else {}
        self.record(
            {
                "type": "intent",
                "address": change.address,
                "operation": change.action.value,
                "kind": change.kind,
                "providers": change.providers,
            }
        )
        self.local.changed = False
        try:
            self._execute(change, previous, outputs)
        except PermanentProviderError:
            if not self.local.changed:
                self.record({"type": "abandon", "address": change.address})
            raise

    def _execute(
        self, change: ResourceChange, previous: ResourceState | None, outputs: dict[str, Any]
    ) -> None:
        if change.action is Action.DELETE:
            for name in change.providers:
                provider = self.providers.get(name)
                run_id = outputs.get(name, {}).get("runId")
                if change.kind == "TrainingJob" and run_id and isinstance(provider, JobProvider):
                    self.call(lambda p=provider, r=run_id: p.cancel(change.address, r))
                    continue
                if provider.supports(change.kind):
                    self.call(
                        lambda p=provider, n=name: p.delete(
                            change.address, change.kind, outputs.get(n, {})
                        ),
                    )
            self.record({"type": "outcome", "address": change.address, "resource": None})
            return
        if change.kind == "TrainingJob" and change.job:
            for name in change.providers:
                outputs[name] = self.run_job(
                    change, self.providers.get(name), outputs.get(name, {})
                )
            self.record_applied(change, outputs)
            return
        desired = self.desired(change)
        for name in change.providers:
            provider = self.providers.get(name)
            if change.action is Action.REPLACE and previous is not None:
                self.call(
                    lambda p=provider, n=name: p.delete(
                        change.address, change.kind, outputs.get(n, {})
                    ),
                )
                outputs[name] = self.call(lambda p=provider: p.create(desired))
            elif change.action is Action.UPDATE and previous is not None and previous.spec:
                outputs[name] = self.call(
                    lambda p=provider, n=name: p.update(desired, outputs.get(n, {}))
                )
            elif previous is not None and outputs.get(name):  # missing on the provider
                outputs[name] = self.call(
                    lambda p=provider, n=name: p.recreate(desired, outputs.get(n, {}))
                )
            else:
                outputs[name] = self.call(lambda p=provider: p.create(desired))
        self.record_applied(change, outputs)

    def record_applied(self, change: ResourceChange, outputs: dict[str, Any]) -> None:
        resource = ResourceState(
            address=change.address,
            kind=change.kind,
            providers=change.providers,
            spec=change.after or {},
            spec_hash=change.after_hash,
            outputs=outputs,
            dependencies=change.dependencies,
        )
        self.record({"type": "outcome", "address": change.address, "resource": resource.to_json()})

    def run_job(
        self, change: ResourceChange, provider: Any, recorded: dict[str, Any]
    ) -> dict[str, Any]:
        """Submit, resume, evaluate or cancel through a JobProvider; outputs for state."""
        if not isinstance(provider, JobProvider):
            raise PermanentProviderError(f"provider {provider.name} cannot run jobs")
        job = change.job
        if job.get("cancel"):
            self.call(lambda: provider.cancel(change.address, job["cancel"]))
        if job.get("launch"):
            launch = launch_from_json(job["launch"])
            self.call(lambda: provider.submit(launch))
        for data in job.get("evaluations", []):
            evaluation = launch_from_json(data)
            self.call(lambda e=evaluation: provider.submit(e))
        keep = ("runId", "inputs", "attempt", "history", "resumeFrom")
        outputs = {key: job[key] for key in keep if key in job}
        context = self.providers.context
        exclude = local_roots(self.providers.config, context.spec_root)
        files = recorded_code_files(job, recorded, exclude)
        if files:
            outputs["codeFiles"] = files
        outputs["lockDigest"] = self.plan.lock_digest
        lineage = dict(recorded.get("lineage") or {})
        if job.get("launch") and job.get("runId") and job["runId"] not in lineage:
            with self.record_lock:
                lineage[job["runId"]] = provenance(
                    job, self.state, (change.after or {}).get("spec", {}), self.commit(), self.plan
                )
        if job.get("evaluations"):
            record_evaluation_inputs(lineage, job["evaluations"])
        if lineage:
            kept = {*outputs.get("history", []), outputs.get("runId")}
            outputs["lineage"] = {run: entry for run, entry in lineage.items() if run in kept}
        if change.action is Action.EVALUATE:
            outputs["evaluated"] = sorted(
                {*recorded.get("evaluated", []), *(e["suite"] for e in job["evaluations"])}
            )
        elif "evaluated" in recorded and change.action is Action.UPDATE:
            outputs["evaluated"] = recorded["evaluated"]
        return outputs


def apply_plan(
    plan: Plan,
    backend: StateBackend,
    providers: ProviderSet,
    *,
    parallelism: int = 10,
    retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen value
    on_event: Event | None = None,
    location: str = "plan",
    stop: threading.Event | None = None,
) -> ApplyResult:
    """Apply `plan`; the caller holds the state lock. Returns one outcome per change."""
    state = backend.read()
    check_fresh(plan, state, location)
    if state is None:
        state = State.new()
    state.tool_version = tool_version()
    walk = _Walk(plan, state, backend, providers, retry, on_event)
    schedule = _Schedule(plan)
    stop = stop or threading.Event()
    result = ApplyResult()
    try:
        schedule.run(walk, max(1, parallelism), stop, result)
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        backend.compact(state)
        result.lineage, result.serial = state.lineage, state.serial
    if stop.is_set():
        result.interrupted = True
    result.outcomes = schedule.all_outcomes(plan)
    return result


class _Schedule:
    """Which of a plan's changes wait, run or have an outcome, in `apply_graph` order."""

    def __init__(self, plan: Plan) -> None:
        self.graph = apply_graph(plan.changes)
        self.changes = {c.address: c for c in plan.actionable}
        self.waiting = {
            address: set(self.graph.predecessors(address)) for address in self.graph.nodes
        }
        self.outcomes: dict[str, Outcome] = {}
        self.running: dict[Future[None], tuple[str, float]] = {}
        self.ready = [address for address, preds in self.waiting.items() if not preds]
        heapq.heapify(self.ready)

    def run(
        self, walk: _Walk, parallelism: int, stop: threading.Event, result: ApplyResult
    ) -> None:
        """Run the changes, at most `parallelism` at once, until none runs or may start."""
        with ThreadPoolExecutor(max_workers=parallelism) as pool:
            while True:
                self.start_ready(pool, walk, stop, parallelism)
                if not self.running:
                    break
                try:
                    done, _ = wait(list(self.running), timeout=0.5, return_when=FIRST_COMPLETED)
                except KeyboardInterrupt:
                    stop.set()
                    result.interrupted = True
                    continue
                for future in done:
                    self.settle(future, walk)

    def start_ready(
        self, pool: ThreadPoolExecutor, walk: _Walk, stop: threading.Event, parallelism: int
    ) -> None:
        """Start the changes that wait for nothing, while there is room and no stop."""
        while self.ready and not stop.is_set() and len(self.running) < parallelism:
            address = heapq.heappop(self.ready)
            if address in self.outcomes:
                continue  # skipped after an upstream failure
            walk.event("start", self.changes[address])
            future = pool.submit(walk.execute, self.changes[address])
            self.running[future] = (address, time.monotonic())

    def settle(self, future: Future[None], walk: _Walk) -> None:
        """The outcome of a finished change: what waited for it is ready, or skipped."""
        address, started = self.running.pop(future)
        seconds = time.monotonic() - started
        error = future.exception()
        change = self.changes[address]
        if error is None:
            self.outcomes[address] = Outcome(
                address, change.action, OutcomeStatus.APPLIED, "", seconds
            )
            walk.event("done", change, f"{seconds:.1f}s")
            for successor in self.graph.successors(address):
                self.waiting[successor].discard(address)
                if not self.waiting[successor] and successor not in self.outcomes:
                    heapq.heappush(self.ready, successor)
        else:
            message = _describe_error(error)
            self.outcomes[address] = Outcome(
                address, change.action, OutcomeStatus.FAILED, message, seconds
            )
            walk.event("failed", change, message)
            self.skip_dependents(address)

    def skip_dependents(self, address: str) -> None:
        """Everything that waits, directly or not, for the failed change `address`."""
        import networkx as nx

        for dependent in sorted(nx.descendants(self.graph, address)):
            if dependent not in self.outcomes:
                self.outcomes[dependent] = Outcome(
                    dependent,
                    self.changes[dependent].action,
                    OutcomeStatus.SKIPPED,
                    f"skipped: {address} failed",
                )

    def all_outcomes(self, plan: Plan) -> list[Outcome]:
        """One outcome per change, in plan order: what never started is `not started`."""
        for address, change in self.changes.items():
            if address not in self.outcomes:
                self.outcomes[address] = Outcome(address, change.action, OutcomeStatus.NOT_STARTED)
        order = {c.address: i for i, c in enumerate(plan.changes)}
        return sorted(self.outcomes.values(), key=lambda o: order[o.address])


def launch_from_json(data: dict[str, Any]) -> JobLaunch:
    fields = dict(data)
    fields["datasets"] = [DatasetInput(**d) for d in data["datasets"]]
    return JobLaunch(**fields)


def _describe_error(error: BaseException) -> str:
    from trainform.specs.secrets import redact  # an outcome is printed: no credential in it

    if isinstance(error, ProviderError | PlannerError):
        return redact(str(error))
    return redact(f"{type(error).__name__}: {error}")
