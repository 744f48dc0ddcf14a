"""The engine commands end to end: the installed `trainform` script on a copy of the quickstart.

Each test runs a short session of commands the way a user would, in a fresh copy, with
colour off and no terminal on stdin. No output may contain a traceback.
"""

from __future__ import annotations

import json
import subprocess

from trainform.planner.backends.local import LocalBackend

from tests.engine.support import SpecFolder, run_trainform

QUEUE = "Queue/default-queue"
QUOTA = "Quota/research/research-default"
OLD_QUEUE = "Queue/old-queue"
OLD_QUOTA = "Quota/research/old-quota"


def trainform(folder: SpecFolder, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = run_trainform(*args, cwd=folder.root)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert result.returncode == code, (
        f"trainform {' '.join(args)} exited {result.returncode}:\n{output}"
    )
    return result


def queue_cpu(folder: SpecFolder) -> str:
    return queue_cpu_at(folder, QUEUE)


def queue_cpu_at(folder: SpecFolder, address: str) -> str:
    return str(folder.document_of(address)["spec"]["pools"][0]["nominalQuota"]["cpu"])


def test_plan_exit_codes_and_saved_plans(quickstart: SpecFolder) -> None:
    plain = trainform(quickstart, "plan", ".")
    assert plain.stdout.endswith("Plan: 8 to create, 0 to update, 0 to replace, 0 to delete.\n")

    made = trainform(quickstart, "plan", ".", "-out", "p.json", "--format", "json", code=0)
    shown = trainform(quickstart, "show", "p.json", "--format", "json")
    assert json.loads(shown.stdout)["summary"]["create"] == 8
    assert shown.stdout == made.stdout
    markdown = trainform(quickstart, "show", "p.json", "--format", "markdown")
    assert markdown.stdout.startswith(
        "### trainform plan: environment `dev`, folder `.`\n\n**Plan: 8 to create,"
    )

    # A saved plan is applied only while the specs are what it was made from.
    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")
    changed = trainform(quickstart, "apply", "p.json", code=1)
    assert "what it was made from changed" in changed.stderr
    assert "specs: digest sha256:" in changed.stderr
    assert not (quickstart.root / ".trainform" / "state.json").exists()
    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 1,", "nominalQuota: {cpu: 2,")
    applied = trainform(quickstart, "apply", "p.json")
    assert "Apply complete: 8 changes applied." in applied.stdout
    assert queue_cpu(quickstart) == "2"

    again = trainform(quickstart, "apply", "p.json", code=1)
    assert "cannot apply plan p.json: it was made before any state existed" in again.stderr
    assert "Create a new plan" in again.stderr

    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")
    update = trainform(quickstart, "plan", ".", "--detailed-exitcode", "-out", "p2.json", code=2)
    assert "~ spec.pools[0].nominalQuota.cpu: 2 -> 1" in update.stdout
    assert "Saved the plan to p2.json. Apply exactly it with: trainform apply p2.json" in (
        update.stdout
    )
    trainform(quickstart, "apply", "p2.json")
    assert queue_cpu(quickstart) == "1"

    stale = trainform(quickstart, "apply", "p2.json", code=1)
    assert "state changed since the plan was made" in stale.stderr
    assert stale.stderr.startswith("error: cannot apply plan p2.json")

    settled = trainform(quickstart, "plan", ".", "--detailed-exitcode")
    assert "No changes. The platform matches the specs." in settled.stdout


def test_a_stale_saved_plan_is_refused_before_it_is_shown(quickstart: SpecFolder) -> None:
    trainform(quickstart, "plan", ".", "-out", "p.json")
    trainform(quickstart, "apply", ".", "--auto-approve")

    stale = trainform(quickstart, "apply", "p.json", code=1)

    assert "cannot apply plan p.json" in stale.stderr
    assert "will be created" not in stale.stdout, "the stale plan was printed as if to be applied"


def platform_file(folder: SpecFolder) -> tuple[bytes, int]:
    """platform.db's bytes and modification time (ns)."""
    return folder.database_path.read_bytes(), folder.database_path.stat().st_mtime_ns


def local_outputs(folder: SpecFolder, address: str) -> dict[str, object]:
    state = folder.state()
    assert state is not None
    return state.resources[address].outputs["local"]


def test_state_commands_import_and_destroy(quickstart: SpecFolder) -> None:
    trainform(quickstart, "apply", ".", "--auto-approve")

    listed = trainform(quickstart, "state", "list", ".")
    assert listed.stdout.splitlines() == sorted(quickstart.reconciled_addresses())

    shown = trainform(quickstart, "state", "show", QUEUE, ".")
    record = json.loads(shown.stdout)
    assert record["address"] == QUEUE and record["kind"] == "Queue"
    assert record["spec"]["spec"]["pools"][0]["pool"] == "this-machine"
    unknown = trainform(quickstart, "state", "show", "Queue/nope", ".", code=1)
    assert "cannot show Queue/nope: not in state" in unknown.stderr

    removed = trainform(quickstart, "state", "rm", QUOTA, QUEUE, "--dir", ".")
    assert f"Removed {QUOTA} from state (the live object is untouched)." in removed.stdout
    state = quickstart.state()
    assert state is not None and QUOTA not in state.resources and QUEUE not in state.resources
    # As another platform left them: the quota under another address, the queue also
    # under another manager (not ours, so no orphan either).
    quickstart.query("UPDATE objects SET address = ? WHERE address = ?", (OLD_QUOTA, QUOTA))
    quickstart.query(
        "UPDATE objects SET address = ?, manager = 'legacy' WHERE address = ?", (OLD_QUEUE, QUEUE)
    )
    orphaned = trainform(quickstart, "drift", ".", code=2)
    assert f"orphaned: {OLD_QUOTA} (local)" in orphaned.stdout
    assert OLD_QUEUE not in orphaned.stdout

    # Import reads and never writes: not a byte, not a commit (data_version counts the
    # commits of other connections).
    before = platform_file(quickstart)
    watcher = quickstart.database()
    version = watcher.execute("PRAGMA data_version").fetchone()[0]
    imported = trainform(quickstart, "import", QUOTA, OLD_QUOTA, ".")
    assert f"Imported {OLD_QUOTA} as {QUOTA}." in imported.stdout
    trainform(quickstart, "import", QUEUE, OLD_QUEUE, ".")
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == version
    watcher.close()
    assert platform_file(quickstart) == before
    assert local_outputs(quickstart, QUEUE)["adopted"] == OLD_QUEUE

    settled = trainform(quickstart, "plan", ".", "--detailed-exitcode")
    assert "orphaned" not in settled.stdout
    twice = trainform(quickstart, "import", QUOTA, QUOTA, ".", code=1)
    assert f"cannot import {QUOTA}: it is already in state" in twice.stderr

    # The first apply of a change moves the adopted row; a fault inside its transaction
    # leaves the row and the state as they were.
    quickstart.edit("specs/platform.yaml", "nominalQuota: {cpu: 2,", "nominalQuota: {cpu: 1,")
    quickstart.query(
        "CREATE TRIGGER fault AFTER UPDATE ON objects BEGIN SELECT RAISE(FAIL, 'disk gone'); END"
    )
    failed = trainform(quickstart, "apply", ".", "--auto-approve", code=1)
    assert "disk gone" in failed.stdout + failed.stderr
    assert QUEUE not in quickstart.rows_per_address()
    (kept,) = quickstart.query("SELECT manager FROM objects WHERE address = ?", (OLD_QUEUE,))
    assert kept["manager"] == "legacy" and queue_cpu_at(quickstart, OLD_QUEUE) == "2"
    assert local_outputs(quickstart, QUEUE)["adopted"] == OLD_QUEUE
    quickstart.query("DROP TRIGGER fault")
    trainform(quickstart, "apply", ".", "--auto-approve")
    (queue,) = quickstart.query("SELECT manager FROM objects WHERE address = ?", (QUEUE,))
    assert queue["manager"] == "trainform" and queue_cpu(quickstart) == "1"
    assert OLD_QUEUE not in quickstart.rows_per_address()
    assert "adopted" not in local_outputs(quickstart, QUEUE)

    destroyed = trainform(quickstart, "destroy", ".", "--auto-approve")
    assert "Destroy complete: 8 resources destroyed." in destroyed.stdout
    assert trainform(quickstart, "state", "list", ".").stdout == ""
    assert quickstart.rows_per_address() == {}  # the adopted quota's row too
    assert (quickstart.root / "data" / "tiny-corpus" / "v1" / "part-000.txt").is_file()


def test_import_of_an_unknown_object_or_undeclared_address_is_refused(
    quickstart: SpecFolder,
) -> None:
    missing = trainform(quickstart, "import", QUOTA, "no-such-object", ".", code=1)
    assert "provider `local` has no object no-such-object" in missing.stderr
    assert "an ID on a local provider is the address the object has in the local" in (
        missing.stderr
    )
    listed = trainform(quickstart, "import", "--help")
    assert "ID, by provider type:" in listed.stdout
    assert "Cohort/<namePrefix><queue> (Queue)" in listed.stdout

    undeclared = trainform(quickstart, "import", "Queue/undeclared", "x", ".", code=1)
    assert "declare it in the specs first" in undeclared.stderr


def test_apply_and_destroy_refuse_to_run_unconfirmed_without_a_terminal(
    quickstart: SpecFolder,
) -> None:
    refused = trainform(quickstart, "apply", ".", code=1)
    assert "refusing to apply these changes without confirmation" in refused.stderr
    assert "pass --auto-approve or apply a saved plan" in refused.stderr
    assert quickstart.state() is None
    assert not quickstart.database_path.exists() or quickstart.rows_per_address() == {}

    quickstart.converge()
    kept = trainform(quickstart, "destroy", ".", code=1)
    assert "refusing to destroy these resources without confirmation" in kept.stderr
    state = quickstart.state()
    assert state is not None and set(state.resources) == quickstart.reconciled_addresses()


def test_a_locked_state_stops_the_cli_with_the_holder_named(quickstart: SpecFolder) -> None:
    backend = LocalBackend(quickstart.root / ".trainform" / "state.json")
    held = backend.lock("apply")
    try:
        blocked = trainform(quickstart, "plan", ".", code=1)
    finally:
        backend.unlock(held)

    assert f"cannot lock state: held by {held.holder}@{held.host} pid {held.pid}" in blocked.stderr
    assert f"trainform force-unlock --env dev {held.id}" in blocked.stderr
    assert "no longer running" not in blocked.stderr


def test_plan_without_the_lock_reads_state_and_writes_nothing(quickstart: SpecFolder) -> None:
    """What a CI plan job with read-only credentials does, while an apply holds the lock."""
    trainform(quickstart, "apply", ".", "--auto-approve")
    state_dir = quickstart.root / ".trainform"
    backend = LocalBackend(state_dir / "state.json")
    held = backend.lock("apply")
    try:
        before = {p.name: p.stat().st_mtime_ns for p in state_dir.iterdir() if p.is_file()}
        planned = trainform(quickstart, "plan", ".", "--no-lock", "--detailed-exitcode")
        after = {p.name: p.stat().st_mtime_ns for p in state_dir.iterdir() if p.is_file()}
    finally:
        backend.unlock(held)

    assert "No changes" in planned.stdout
    assert {k: v for k, v in after.items() if k != "platform.db"} == {
        k: v for k, v in before.items() if k != "platform.db"
    }


def test_import_from_an_instance_writes_specs_that_plan_clean(quickstart: SpecFolder) -> None:
    trainform(quickstart, "apply", ".", "--auto-approve")
    addresses = sorted(quickstart.reconciled_addresses())
    for spec in (quickstart.root / "specs").glob("*.yaml"):
        spec.unlink()
    for kept in (quickstart.root / ".trainform").glob("state.json*"):
        kept.unlink()  # a new workspace: no state, no backups, no identity

    imported = trainform(quickstart, "import", "--from", "local")
    for address in addresses:
        assert f"Imported {address}." in imported.stdout
    # under the quickstart's adminPaths (specs/**), so tenancy accepts the adopted platform
    written = (quickstart.root / "specs" / "imported-local.yaml").read_text()
    assert written.startswith("# Generated by `trainform import --from local`")
    trainform(quickstart, "plan", ".", "--detailed-exitcode")
    assert trainform(quickstart, "state", "list", ".").stdout.splitlines() == addresses

    again = trainform(quickstart, "import", "--from", "local")
    assert "Nothing to import from local" in again.stdout
    unknown = trainform(quickstart, "import", "--from", "nosuch", code=1)
    assert "no such provider instance in trainform.yaml (instances: local)" in unknown.stderr
    usage = trainform(quickstart, "import", "Queue/x", code=1)
    assert "give ADDRESS and ID" in usage.stderr


def test_status_takes_the_spec_folder_where_the_other_commands_take_it(
    quickstart: SpecFolder,
) -> None:
    result = run_trainform("status", quickstart.root.name, cwd=quickstart.root.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "No training jobs.\n"
