"""A saved plan binds the spec folder by identity, not by an absolute path.

The plan records the spec folder relative to the directory plan ran in, and a state inside
the folder relative to the folder. Copied into another checkout, `apply FILE` applies to
that checkout's folder, and only when that checkout's state is the one planned against
(lineage and serial); the checkout it was made in is never touched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers import CONFIG, PROJECT, run_cli, write_tree


def checkout(root: Path) -> Path:
    write_tree(root, {"trainform.yaml": CONFIG, "platform.yaml": PROJECT})
    return root


def test_a_plan_copied_into_another_checkout_applies_there_not_where_it_was_made(
    tmp_path: Path,
) -> None:
    made_in = checkout(tmp_path / "a")
    planned = run_cli("plan", ".", "-out", "p.plan", cwd=made_in)
    assert planned.returncode == 0, planned.stderr
    other = tmp_path / "b"
    shutil.copytree(made_in, other, ignore=shutil.ignore_patterns(".trainform"))

    applied = run_cli("apply", "p.plan", cwd=other)

    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (other / ".trainform" / "state.json").exists()
    assert not (made_in / ".trainform" / "state.json").exists()


def test_a_plan_copied_into_a_checkout_with_another_state_is_refused(tmp_path: Path) -> None:
    made_in = checkout(tmp_path / "a")
    assert run_cli("apply", ".", "--auto-approve", cwd=made_in).returncode == 0
    write_tree(made_in, {"second.yaml": PROJECT.replace("research", "second")})
    assert run_cli("plan", ".", "-out", "p.plan", cwd=made_in).returncode == 0
    other = checkout(tmp_path / "b")
    assert run_cli("apply", ".", "--auto-approve", cwd=other).returncode == 0
    write_tree(other, {"second.yaml": PROJECT.replace("research", "second")})
    shutil.copy(made_in / "p.plan", other / "p.plan")
    before = (made_in / ".trainform" / "state.json").read_bytes()

    refused = run_cli("apply", "p.plan", cwd=other)

    assert refused.returncode == 1
    assert "lineage" in refused.stderr, refused.stderr
    assert (made_in / ".trainform" / "state.json").read_bytes() == before


def test_a_plan_applied_where_its_folder_is_missing_names_it(tmp_path: Path) -> None:
    made_in = checkout(tmp_path / "a" / "specs")
    assert run_cli("plan", "specs", "-out", "p.plan", cwd=tmp_path / "a").returncode == 0
    elsewhere = tmp_path / "c"
    elsewhere.mkdir()
    shutil.copy(tmp_path / "a" / "p.plan", elsewhere / "p.plan")

    refused = run_cli("apply", "p.plan", cwd=elsewhere)

    assert refused.returncode == 1
    assert "made for the spec folder specs" in refused.stderr
    assert not (made_in / ".trainform" / "state.json").exists()
