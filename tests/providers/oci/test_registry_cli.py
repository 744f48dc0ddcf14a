"""The registry provider through the installed `trainform` command: validate, plan, apply,
lock, then a tag moved out of band shows in `trainform drift` with both digests."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.engine.support import run_trainform
from tests.services.registry import RegistryServer, head_digest, push_image

LABEL = "org.opencontainers.image.revision"


def write_specs(root: Path, host: str, staging: str, production: str) -> None:
    root.mkdir(parents=True)
    (root / "trainform.yaml").write_text(
        "apiVersion: trainform/v1\n"
        "providers:\n"
        "  - name: registry\n"
        "    type: registry\n"
        f"    connection: {{url: 'http://{host}', insecure: true, allowed: ['{host}']}}\n"
        "state: {backend: local, path: .trainform/state.json}\n",
        encoding="utf-8",
    )
    (root / "images.yaml").write_text(
        "apiVersion: trainform/v1\n"
        "kind: Image\n"
        "metadata: {name: trainer-candidate}\n"
        "spec:\n"
        f"  reference: {host}/{staging}:2.4.1\n"
        f"  requiredLabels: [{LABEL}]\n"
        "---\n"
        "apiVersion: trainform/v1\n"
        "kind: Image\n"
        "metadata: {name: trainer}\n"
        "spec:\n"
        f"  reference: {host}/{production}:2.4.1\n"
        "  promotedFrom: trainer-candidate\n",
        encoding="utf-8",
    )


def test_apply_then_a_moved_tag_shows_in_drift(
    registry_server: RegistryServer, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:10]
    staging, production = f"ml-staging/{suffix}", f"ml/{suffix}"
    first = push_image(registry_server.url, staging, "2.4.1", {LABEL: "abc"}, b"first\n")
    root = tmp_path / "platform"
    write_specs(root, registry_server.host, staging, production)

    validated = run_trainform("validate", str(root), cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    unpinned = run_trainform("plan", str(root), cwd=tmp_path)
    assert unpinned.returncode == 3, unpinned.stdout + unpinned.stderr  # image-pinned denies
    # Before the promotion runs, the lock pins the digest it will copy: its source's.
    locked = run_trainform("lock", str(root), cwd=tmp_path)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    lock = json.loads((root / "trainform.lock").read_text(encoding="utf-8"))
    assert lock["images"]["Image/trainer-candidate"] == {"digest": first.digest}
    assert lock["images"]["Image/trainer"] == {"digest": first.digest}
    planned = run_trainform("plan", str(root), cwd=tmp_path)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "Image/trainer" in planned.stdout and "Image/trainer-candidate" in planned.stdout
    applied = run_trainform("apply", str(root), "--auto-approve", cwd=tmp_path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert head_digest(registry_server.url, production, "2.4.1") == first.digest
    again = run_trainform("plan", str(root), "--locked", "--detailed-exitcode", cwd=tmp_path)
    assert "No changes." in again.stdout, again.stdout + again.stderr
    # The registry is shared: other tests' promotions are orphans here (exit 2), nothing else.
    findings = [line for line in again.stdout.splitlines() if line.startswith("  - ")]
    assert all("[orphaned]" in line for line in findings), again.stdout
    assert again.returncode == (2 if findings else 0), again.stdout + again.stderr

    second = push_image(registry_server.url, staging, "2.4.1", {LABEL: "def"}, b"second\n")
    drift = run_trainform("drift", str(root), "--format", "json", cwd=tmp_path)

    assert drift.returncode == 2, drift.stdout + drift.stderr
    report = json.loads(drift.stdout)
    # the registry is shared: other tests' promotions show as orphaned, nothing else does
    ours = [f for f in report["findings"] if f["drift"] != "orphaned"]
    (finding,) = ours
    assert finding["address"] == "Image/trainer-candidate"
    assert finding["drift"] == "tag-moved"
    assert finding["evidence"]["pinned"] == first.digest
    assert finding["evidence"]["current"] == second.digest
    assert finding["evidence"]["tag"] == "2.4.1"
    text = run_trainform("drift", str(root), cwd=tmp_path)
    assert text.returncode == 2
    assert "tag-moved: Image/trainer-candidate (registry)" in text.stdout
    assert first.digest in text.stdout and second.digest in text.stdout


def test_plan_refuses_an_image_from_a_registry_not_allowed(
    registry_server: RegistryServer, tmp_path: Path
) -> None:
    root = tmp_path / "platform"
    write_specs(root, registry_server.host, "ml-staging/x", "ml/x")
    images = root / "images.yaml"
    elsewhere = "docker.example.com/ml-staging/x:2.4.1"
    images.write_text(
        images.read_text(encoding="utf-8").replace(
            f"{registry_server.host}/ml-staging/x:2.4.1", elsewhere
        ),
        encoding="utf-8",
    )

    planned = run_trainform("plan", str(root), cwd=tmp_path)

    assert planned.returncode == 1
    output = planned.stdout + planned.stderr
    assert "Image/trainer-candidate" in output and "spec.reference" in output
    assert f"{elsewhere}: registry docker.example.com is not allowed" in output


def test_import_of_a_tag_promoted_by_hand_plans_no_changes_and_the_first_apply_marks_it(
    registry_server: RegistryServer, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:10]
    staging, production = f"ml-staging/{suffix}", f"ml/{suffix}"
    pushed = push_image(registry_server.url, staging, "2.4.1", {LABEL: "abc"}, b"by hand\n")
    push_image(registry_server.url, production, "2.4.1", {LABEL: "abc"}, b"by hand\n")
    root = tmp_path / "platform"
    write_specs(root, registry_server.host, staging, production)
    host = registry_server.host

    for address, reference in (
        ("Image/trainer-candidate", f"{host}/{staging}:2.4.1"),
        ("Image/trainer", f"{host}/{production}:2.4.1"),
    ):
        imported = run_trainform("import", address, reference, str(root), cwd=tmp_path)
        assert imported.returncode == 0, imported.stdout + imported.stderr
    locked = run_trainform("lock", str(root), cwd=tmp_path)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    planned = run_trainform("plan", str(root), "--locked", "--detailed-exitcode", cwd=tmp_path)

    assert "No changes." in planned.stdout, planned.stdout + planned.stderr
    # The registry is shared: other tests' promotions are orphans here (exit 2), nothing else.
    findings = [line for line in planned.stdout.splitlines() if line.startswith("  - ")]
    assert all("[orphaned]" in line for line in findings), planned.stdout
    assert planned.returncode == (2 if findings else 0), planned.stdout + planned.stderr
    assert head_digest(registry_server.url, production, "2.4.1.trainform") is None

    images = root / "images.yaml"
    images.write_text(
        images.read_text(encoding="utf-8").replace(
            "metadata: {name: trainer}", "metadata: {name: trainer, labels: {team: ml}}"
        ),
        encoding="utf-8",
    )
    applied = run_trainform("apply", str(root), "--locked", "--auto-approve", cwd=tmp_path)

    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert head_digest(registry_server.url, production, "2.4.1") == pushed.digest
    assert head_digest(registry_server.url, production, "2.4.1.trainform") is not None
