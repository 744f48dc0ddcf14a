"""Specs at a Git ref: read from Git's objects, named as in the working tree, never run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trainform.policies.review.errors import GitRefError, RefLoadError
from trainform.policies.review.gitrefs import open_side, resolve_commit
from trainform.policies.review.loading import load_side

from tests.policies.review.fixture import commit, git, make_repository, move_gpus


def test_base_ref_is_read_from_git_not_the_working_tree(tmp_path: Path) -> None:
    specs = make_repository(tmp_path / "repo")
    move_gpus(tmp_path / "repo")
    (specs / "platform" / "queues.yaml").write_text("not: [valid", encoding="utf-8")
    side = open_side("base", str(specs), "HEAD~1")
    try:
        loaded = load_side(side)
        queue = loaded.resources["Queue/team-a"].document
        assert queue.spec.pools[0].nominal_quota.gpu == 32  # type: ignore[attr-defined]
        assert side.commit == resolve_commit(tmp_path / "repo", "HEAD~1")
    finally:
        side.close()
    assert not side.folder.exists()


def test_spec_folder_may_be_a_subfolder_and_files_keep_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_repository(tmp_path / "repo", subdir="infra/specs")
    (tmp_path / "repo" / "README").write_text("outside the specs\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path / "repo")
    side = open_side("base", "infra/specs", "HEAD")
    try:
        assert sorted(p.name for p in side.folder.iterdir()) == [
            "CODEOWNERS", "platform", "teams", "trainform.yaml"
        ]  # fmt: skip
        loaded = load_side(side)
        location = str(loaded.resources["Queue/team-b"].location)
        assert side.relabel(location) == os.path.join(
            "infra", "specs", "platform", "queues.yaml:14:1"
        )
    finally:
        side.close()


def test_symlinks_of_the_ref_are_not_followed(tmp_path: Path) -> None:
    specs = make_repository(tmp_path / "repo")
    secret = tmp_path / "secret.yaml"
    secret.write_text("password: hunter2\n", encoding="utf-8")
    (specs / "platform" / "leak.yaml").symlink_to(secret)
    commit(specs, {}, "add a symlink")
    side = open_side("head", str(specs), "HEAD")
    try:
        assert not (side.folder / "platform" / "leak.yaml").exists()
    finally:
        side.close()


@pytest.mark.parametrize("ref", ["no-such-branch", "HEAD~5", "--output=/tmp/x", ""])
def test_a_ref_that_names_no_commit_is_an_error_naming_it(tmp_path: Path, ref: str) -> None:
    specs = make_repository(tmp_path / "repo")
    with pytest.raises(GitRefError, match="cannot read ref"):
        open_side("base", str(specs), ref)


def test_a_folder_outside_a_repository_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(GitRefError, match="not inside a Git repository"):
        open_side("base", str(tmp_path), "HEAD")


def test_a_spec_folder_missing_at_the_ref_is_an_error(tmp_path: Path) -> None:
    make_repository(tmp_path / "repo")
    git(tmp_path / "repo", "checkout", "-q", "-b", "later")
    commit(tmp_path / "repo", {"new/trainform.yaml": "apiVersion: trainform/v1\n"}, "new folder")
    with pytest.raises(GitRefError, match="no such folder"):
        open_side("base", str(tmp_path / "repo" / "new"), "HEAD~1")


def test_invalid_specs_at_a_ref_are_reported_with_worktree_file_and_line(tmp_path: Path) -> None:
    specs = make_repository(tmp_path / "repo")
    commit(specs, {"platform/queues.yaml": "apiVersion: trainform/v1\nkind: Queue\n"}, "broken")
    side = open_side("head", str(specs), "HEAD")
    try:
        with pytest.raises(RefLoadError) as caught:
            load_side(side)
    finally:
        side.close()
    files = {d.location.file for d in caught.value.error.diagnostics if d.location}
    assert os.path.join(str(specs), "platform", "queues.yaml") in files
    assert all(file.startswith(str(specs) + os.sep) for file in files)
    assert caught.value.side == "head"
