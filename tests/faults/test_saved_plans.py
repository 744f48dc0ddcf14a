"""Saved plans bind everything they were made from; a signed plan cannot be edited.

Each case saves a plan of the quickstart (with its training job, never applied here),
changes one thing it depends on, and runs `trainform apply FILE`: it must exit 1 before
any provider call, name what changed, and leave no state behind.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from trainform.planner.state import canonical_json

from tests.engine.support import QUICKSTART, copy_example
from tests.helpers import run_cli

KEY = {"TRAINFORM_PLAN_KEY": "plan-job-secret-0123456789"}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = copy_example(QUICKSTART, tmp_path / "quickstart", jobs=True)
    assert run_cli("lock", str(root)).returncode == 0
    return root


def save(folder: Path, env: dict[str, str] | None = None) -> Path:
    plan = folder / "p.plan"
    made = run_cli("plan", str(folder), "--locked", "-out", str(plan), env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    return plan


def refused(plan: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = run_cli("apply", str(plan), *args, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert not (plan.parent / ".trainform" / "state.json").exists()
    return result.stderr


def test_changed_specs_are_refused(folder: Path) -> None:
    plan = save(folder)
    spec = folder / "specs" / "platform.yaml"
    spec.write_text(spec.read_text().replace("maxWallTime: 1h", "maxWallTime: 2h"))
    assert "specs: digest sha256:" in refused(plan)


def test_a_changed_lock_file_is_refused(folder: Path) -> None:
    plan = save(folder)
    lock = folder / "trainform.lock"
    lock.write_text(lock.read_text() + "\n")
    assert "trainform.lock: sha256:" in refused(plan)


def test_changed_job_code_is_refused_naming_both_digests(folder: Path) -> None:
    plan = save(folder)
    (folder / "code" / "train.py").write_text("print('other code')\n")
    message = refused(plan)
    assert "code code#.: contentDigest=sha256:" in message
    assert "when planned, contentDigest=sha256:" in message


def test_another_environment_is_refused(folder: Path) -> None:
    plan = save(folder)
    assert "environment: the plan was made for" in refused(plan, "--env", "other")


def test_an_edited_plan_with_a_recomputed_checksum_is_refused_when_signed(folder: Path) -> None:
    plan = save(folder, env=KEY)
    data = json.loads(plan.read_text())
    assert data["signature"].startswith("hmac-sha256:")
    data.pop("checksum")
    data["changes"][0]["reasons"] = ["edited by hand"]
    data["checksum"] = "sha256:" + hashlib.sha256(canonical_json(data).encode()).hexdigest()
    plan.write_text(json.dumps(data))

    assert "signature does not match" in refused(plan, env=KEY)


def test_an_unsigned_plan_is_refused_under_the_plan_key(folder: Path) -> None:
    plan = save(folder)
    assert "carries no signature" in refused(plan, env=KEY)


def test_a_signed_unchanged_plan_applies(folder: Path) -> None:
    plan = save(folder, env=KEY)
    applied = run_cli("apply", str(plan), env=KEY)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Apply complete" in applied.stdout
    run_cli("destroy", str(folder), "--auto-approve")


def test_data_changed_under_a_pinned_version_is_refused(folder: Path) -> None:
    plan = save(folder)
    pinned = json.loads(plan.read_text())["pins"]["datasets"]
    assert pinned, "the quickstart's job pins its datasets"
    corpus = next(p for p in (folder / "data").rglob("*") if p.is_file())
    corpus.write_text(corpus.read_text() + "one more line\n")
    assert "the data it pinned changed" in refused(plan)
