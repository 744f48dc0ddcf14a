"""apply_plan: order, partial failure, retries, and convergence after faults and crashes.

The fault tests follow one pattern: an apply is broken somewhere (a provider failing on
its n-th call, a process killed mid-call, a journal intent without outcome), then a clean
plan and apply must converge: the next plan is empty, state holds exactly the desired
addresses, and the platform database holds one object per address and nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from trainform.planner.apply import OutcomeStatus, RetryPolicy, apply_plan
from trainform.planner.plan_model import Action
from trainform.planner.session import ProviderSet
from trainform.planner.state import State
from trainform.providers.base import DesiredResource
from trainform.providers.errors import TransientProviderError

from tests.engine.support import (
    QUICKSTART,
    FaultyLocalProvider,
    SpecFolder,
    copy_example,
    run_trainform,
    simulate_crash,
)

QUEUE = "Queue/default-queue"
QUOTA = "Quota/research/research-default"
POOL = "ResourcePool/this-machine"

FaultyProviders = Callable[..., ProviderSet]


def local_of(providers: ProviderSet) -> FaultyLocalProvider:
    provider = providers.get("local")
    assert isinstance(provider, FaultyLocalProvider)
    return provider


def position(events: list[tuple[str, str, str]], moment: str, address: str) -> int:
    return next(i for i, (m, _, a) in enumerate(events) if m == moment and a == address)


def assert_converged(folder: SpecFolder) -> None:
    """The platform matches the specs, state knows exactly it, the database holds it once."""
    assert not folder.plan().has_changes
    desired = folder.reconciled_addresses()
    state = folder.state()
    assert state is not None
    assert set(state.resources) == desired
    assert all(resource.pending is None for resource in state.resources.values())
    rows = folder.rows_per_address()
    assert set(rows) == desired
    assert set(rows.values()) == {1}


# order ----------------------------------------------------------------------------------


def test_creates_start_only_after_their_dependencies_finished(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    providers = faulty_providers(quickstart.root)
    plan = quickstart.plan(providers)

    result = quickstart.apply(plan, providers, parallelism=10)

    assert not result.failed
    events = local_of(providers).events
    planned = {change.address for change in plan.actionable}
    assert sorted(a for _, a in local_of(providers).calls) == sorted(planned)
    edges = [(d, c.address) for c in plan.actionable for d in c.dependencies if d in planned]
    assert len(edges) >= 6
    for dependency, dependent in edges:
        assert position(events, "end", dependency) < position(events, "start", dependent), (
            f"{dependent} started before {dependency} finished"
        )


def test_the_plan_lists_changes_in_a_topological_order(quickstart: SpecFolder) -> None:
    plan = quickstart.plan()
    index = {change.address: i for i, change in enumerate(plan.changes)}

    for change in plan.actionable:
        for dependency in change.dependencies:
            if dependency in index:
                assert index[dependency] < index[change.address]


def test_deletes_run_in_reverse_dependency_order(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    quickstart.converge()
    state = quickstart.state()
    assert state is not None
    providers = faulty_providers(quickstart.root)
    plan = quickstart.plan(providers, destroy=True)
    assert {c.action for c in plan.actionable} == {Action.DELETE}
    index = {change.address: i for i, change in enumerate(plan.changes)}

    result = quickstart.apply(plan, providers, parallelism=10)

    assert not result.failed
    events = local_of(providers).events
    edges = [(d, a) for a, r in state.resources.items() for d in r.dependencies]
    assert len(edges) >= 6
    for dependency, dependent in edges:
        assert index[dependent] < index[dependency]
        assert position(events, "end", dependent) < position(events, "start", dependency), (
            f"{dependency} was deleted before {dependent}, which depends on it"
        )
    after = quickstart.state()
    assert after is not None and after.resources == {}
    assert quickstart.rows_per_address() == {}


def test_a_delete_runs_before_the_replacement_of_what_it_depended_on(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    """The old object a replacement deletes must outlive whatever still depends on it."""
    suite = "EvalSuite/research/heldout-perplexity"
    heldout = "Dataset/heldout"
    quickstart.converge()
    quickstart.drop_document("specs/training.yaml", "EvalSuite", "heldout-perplexity")
    quickstart.edit("specs/data.yaml", "source: data/heldout", "source: data/tiny-corpus")
    providers = faulty_providers(quickstart.root)
    plan = quickstart.plan(providers)
    assert {c.address: c.action for c in plan.actionable} == {
        suite: Action.DELETE,
        heldout: Action.REPLACE,
    }

    quickstart.apply(plan, providers, parallelism=1)

    events = local_of(providers).events
    old_heldout_deleted = next(
        i for i, event in enumerate(events) if event == ("start", "delete", heldout)
    )
    assert position(events, "end", suite) < old_heldout_deleted, events


def test_no_more_calls_than_the_parallelism_are_in_flight(
    quickstart: SpecFolder, faulty_providers: FaultyProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    providers = faulty_providers(quickstart.root)
    local = local_of(providers)
    put = local._put

    def slow_put(resource):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return put(resource)

    monkeypatch.setattr(local, "_put", slow_put)

    quickstart.apply(quickstart.plan(providers), providers, parallelism=2)

    in_flight, most = 0, 0
    for moment, _, _ in local.events:
        in_flight += 1 if moment == "start" else -1
        most = max(most, in_flight)
    assert most == 2


# partial failure ------------------------------------------------------------------------


def test_a_failure_skips_only_its_dependents(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    providers = faulty_providers(quickstart.root, fail_addresses={POOL})
    plan = quickstart.plan(providers)

    result = quickstart.apply(plan, providers)

    table = {o.address: (o.status, o.message) for o in result.outcomes}
    assert table[POOL][0] is OutcomeStatus.FAILED
    assert f"(create {POOL})" in table[POOL][1] and "injected failure" in table[POOL][1]
    assert table[QUEUE] == (OutcomeStatus.SKIPPED, f"skipped: {POOL} failed")
    assert table[QUOTA] == (OutcomeStatus.SKIPPED, f"skipped: {POOL} failed")
    independent = quickstart.reconciled_addresses() - {POOL, QUEUE, QUOTA}
    assert {a: table[a][0] for a in independent} == {a: OutcomeStatus.APPLIED for a in independent}
    assert result.failed
    assert [o.address for o in result.outcomes] == [c.address for c in plan.actionable]
    assert set(quickstart.rows_per_address()) == independent

    quickstart.converge()
    assert_converged(quickstart)


def test_a_create_refused_by_the_provider_leaves_no_pending_record(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    """A permanent error is an outcome, not a crash: state must not claim the object."""
    providers = faulty_providers(quickstart.root, fail_addresses={QUEUE})
    quickstart.apply(quickstart.plan(providers), providers)

    state = quickstart.state()
    assert state is not None
    assert QUEUE not in state.resources
    queue = next(c for c in quickstart.plan().changes if c.address == QUEUE)
    assert queue.reasons == ["not yet created"]


def test_a_stop_request_starts_nothing_and_keeps_state(quickstart: SpecFolder) -> None:
    stop = threading.Event()
    stop.set()
    plan = quickstart.plan()

    result = apply_plan(plan, quickstart.backend(), quickstart.providers(), stop=stop)

    assert result.interrupted and result.failed
    assert {o.status for o in result.outcomes} == {OutcomeStatus.NOT_STARTED}
    state = quickstart.state()
    assert state is not None and state.resources == {}


# retries --------------------------------------------------------------------------------


def test_transient_errors_are_retried_until_they_succeed(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    providers = faulty_providers(quickstart.root, fail_on={1, 2, 5}, error=TransientProviderError)

    result = quickstart.apply(quickstart.plan(providers), providers, parallelism=1)

    assert not result.failed
    assert len(local_of(providers).calls) == len(quickstart.reconciled_addresses()) + 3
    assert_converged(quickstart)


def test_a_transient_error_that_persists_fails_after_the_last_attempt(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    providers = faulty_providers(
        quickstart.root, fail_addresses={QUOTA}, error=TransientProviderError
    )

    result = quickstart.apply(
        quickstart.plan(providers), providers, retry=RetryPolicy(attempts=3, base_delay=0)
    )

    (failed,) = [o for o in result.outcomes if o.status is OutcomeStatus.FAILED]
    assert failed.address == QUOTA and "injected failure" in failed.message
    assert [a for _, a in local_of(providers).calls].count(QUOTA) == 3


def test_a_permanent_error_is_not_retried(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    providers = faulty_providers(quickstart.root, fail_addresses={QUOTA})

    quickstart.apply(quickstart.plan(providers), providers)

    assert [a for _, a in local_of(providers).calls].count(QUOTA) == 1


# the n-th call fails ---------------------------------------------------------------------


def mutating_calls(folder: SpecFolder, faulty_providers: FaultyProviders, **options: object) -> int:
    providers = faulty_providers(folder.root)
    folder.apply(folder.plan(providers, **options), providers)
    return len(local_of(providers).calls)


@pytest.mark.parametrize(
    ("after", "parallelism"),
    [
        pytest.param(False, 1, id="fails-before-the-change"),
        pytest.param(True, 1, id="fails-after-the-change"),
        pytest.param(True, 4, id="fails-after-the-change-in-parallel"),
    ],
)
def test_an_apply_failing_on_any_call_converges_on_the_next_apply(
    tmp_path: Path, faulty_providers: FaultyProviders, after: bool, parallelism: int
) -> None:
    counting = SpecFolder(copy_example(QUICKSTART, tmp_path / "count"))
    total = mutating_calls(counting, faulty_providers)
    assert total == len(counting.reconciled_addresses())
    counting.close()

    for n in range(1, total + 1):
        folder = SpecFolder(copy_example(QUICKSTART, tmp_path / f"n{n}"))
        try:
            providers = faulty_providers(folder.root, fail_on={n}, after=after)
            result = folder.apply(folder.plan(providers), providers, parallelism=parallelism)
            assert result.count(OutcomeStatus.FAILED) == 1, (n, result.outcomes)

            folder.converge()
            assert_converged(folder)
        finally:
            folder.close()


@pytest.mark.parametrize(
    "after",
    [
        pytest.param(False, id="fails-before-the-change"),
        pytest.param(True, id="fails-after-the-change"),
    ],
)
def test_a_destroy_failing_on_any_call_converges_on_the_next_destroy(
    tmp_path: Path, faulty_providers: FaultyProviders, after: bool
) -> None:
    template = SpecFolder(copy_example(QUICKSTART, tmp_path / "template"))
    template.converge()
    total = mutating_calls(template, faulty_providers, destroy=True)
    assert total == len(template.reconciled_addresses())
    template.close()

    for n in range(1, total + 1):
        folder = SpecFolder(copy_example(QUICKSTART, tmp_path / f"n{n}"))
        try:
            folder.converge()
            providers = faulty_providers(folder.root, fail_on={n}, after=after)
            result = folder.apply(folder.plan(providers, destroy=True), providers, parallelism=1)
            assert result.count(OutcomeStatus.FAILED) == 1, (n, result.outcomes)

            folder.converge(destroy=True)
            state = folder.state()
            assert state is not None and state.resources == {}, n
            assert folder.rows_per_address() == {}, n
            assert not folder.plan(destroy=True).has_changes
        finally:
            folder.close()


# crashes --------------------------------------------------------------------------------

KILLED_APPLY = """\
import sys
import time
from pathlib import Path

from trainform.planner.apply import apply_plan
from trainform.planner.plan import make_plan
from trainform.planner.session import ProviderSet
from trainform.planner.workspace import make_backend
from trainform.providers.local.provider import LocalProvider
from trainform.specs import load_specs


class SlowLocalProvider(LocalProvider):
    def create(self, resource):
        outputs = super().create(resource)
        time.sleep(0.3)  # the object exists; its outcome is not recorded yet
        return outputs


root = Path(sys.argv[1])
specs = load_specs(root)
backend = make_backend(specs.config, root)
providers = ProviderSet(specs.config, root, classes={"local": SlowLocalProvider})
backend.lock("apply")
plan = make_plan(specs, backend.read(), providers)
apply_plan(plan, backend, providers, parallelism=1)
"""


def journal_counts(journal: Path) -> tuple[int, int]:
    try:
        lines = journal.read_bytes().splitlines()
    except FileNotFoundError:
        return 0, 0
    entries = []
    for line in lines[1:]:
        try:
            entries.append(json.loads(line))
        except ValueError:
            break
    intents = sum(1 for e in entries if e.get("type") == "intent")
    outcomes = sum(1 for e in entries if e.get("type") == "outcome")
    return intents, outcomes


def test_an_apply_killed_mid_call_converges_after_force_unlock(quickstart: SpecFolder) -> None:
    script = quickstart.root.parent / "killed_apply.py"
    script.write_text(KILLED_APPLY, encoding="utf-8")
    journal = quickstart.root / ".trainform" / "state.json.journal"
    process = subprocess.Popen(
        [sys.executable, str(script), str(quickstart.root)],
        cwd=quickstart.root.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            intents, outcomes = journal_counts(journal)
            if outcomes >= 2 and intents > outcomes:
                break
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the apply never got under way"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
    assert process.returncode == -signal.SIGKILL

    lock = json.loads((quickstart.root / ".trainform" / "state.json.lock").read_text())
    assert lock["pid"] == process.pid and lock["operation"] == "apply"
    state = quickstart.state()
    assert state is not None
    assert [a for a, r in state.resources.items() if r.pending] != []

    blocked = run_trainform("plan", ".", cwd=quickstart.root)
    assert blocked.returncode == 1
    assert "that process is no longer running" in blocked.stderr
    assert f"trainform force-unlock --env dev {lock['id']}" in blocked.stderr

    unlocked = run_trainform("force-unlock", lock["id"], ".", cwd=quickstart.root)
    assert unlocked.returncode == 0, unlocked.stderr
    assert f"Released lock {lock['id']}" in unlocked.stdout

    resumed = run_trainform("plan", ".", cwd=quickstart.root)
    assert resumed.returncode == 0, resumed.stderr
    assert "interrupted; converging" in resumed.stdout

    applied = run_trainform("apply", ".", "--auto-approve", cwd=quickstart.root)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Apply complete" in applied.stdout

    final = run_trainform("plan", ".", "--detailed-exitcode", cwd=quickstart.root)
    assert final.returncode == 0, final.stdout + final.stderr
    assert "No changes." in final.stdout
    for result in (blocked, unlocked, resumed, applied, final):
        assert "Traceback" not in result.stdout + result.stderr
    assert_converged(quickstart)


def record_crashed_intent(folder: SpecFolder, address: str, operation: str) -> None:
    """Journal an intent and die before its outcome, as a killed apply would."""
    backend = folder.backend()
    state = backend.read() or State.new()
    entry = {
        "type": "intent",
        "address": address,
        "operation": operation,
        "kind": address.split("/")[0],
        "providers": ["local"],
    }
    backend.record(state, entry)
    simulate_crash(backend)


def test_a_crashed_create_shows_as_a_converging_create(quickstart: SpecFolder) -> None:
    record_crashed_intent(quickstart, QUEUE, "create")

    plan = quickstart.plan()

    queue = next(c for c in plan.changes if c.address == QUEUE)
    assert queue.action is Action.CREATE
    assert queue.reasons == ["an earlier create was interrupted; converging"]
    quickstart.apply(plan)
    assert_converged(quickstart)


def test_a_crashed_create_that_reached_the_provider_converges_without_a_duplicate(
    quickstart: SpecFolder,
) -> None:
    quickstart.converge()
    quickstart.query("DELETE FROM objects WHERE address = ?", (QUOTA,))
    backend = quickstart.backend()
    state = backend.read()
    assert state is not None
    backend.record(state, {"type": "outcome", "address": QUOTA, "resource": None})
    backend.compact(state)
    record_crashed_intent(quickstart, QUOTA, "create")
    providers = quickstart.providers()
    desired = next(c for c in quickstart.plan().changes if c.address == QUOTA)
    providers.get("local").create(
        DesiredResource(QUOTA, "Quota", "research-default", "research", desired.after or {})
    )

    plan = quickstart.plan()

    assert [(c.address, c.action) for c in plan.actionable] == [(QUOTA, Action.CREATE)]
    quickstart.apply(plan)
    assert_converged(quickstart)


def test_a_crashed_update_shows_as_a_converging_update(quickstart: SpecFolder) -> None:
    quickstart.converge()
    record_crashed_intent(quickstart, QUEUE, "update")

    plan = quickstart.plan()

    assert [(c.address, c.action, c.reasons) for c in plan.actionable] == [
        (QUEUE, Action.UPDATE, ["an earlier update was interrupted; converging"])
    ]
    quickstart.apply(plan)
    assert_converged(quickstart)


def test_a_crashed_delete_shows_as_a_converging_delete(quickstart: SpecFolder) -> None:
    quickstart.converge()
    quickstart.drop_document("specs/platform.yaml", "Quota", "research-default")
    record_crashed_intent(quickstart, QUOTA, "delete")
    quickstart.query("DELETE FROM objects WHERE address = ?", (QUOTA,))

    plan = quickstart.plan()

    assert [(c.address, c.action, c.reasons) for c in plan.actionable] == [
        (QUOTA, Action.DELETE, ["no longer in the specs", "an earlier delete was interrupted"])
    ]
    quickstart.apply(plan)
    assert_converged(quickstart)


def test_a_plan_without_changes_calls_no_provider(
    quickstart: SpecFolder, faulty_providers: FaultyProviders
) -> None:
    quickstart.converge()
    providers = faulty_providers(quickstart.root)
    plan = quickstart.plan(providers)

    result = quickstart.apply(plan, providers)

    assert result.outcomes == [] and not result.failed
    assert local_of(providers).calls == []
