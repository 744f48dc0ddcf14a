"""Files written whole or not at all: a refused write (a full disk) names the path, leaves
the old file as it was and no temporary file beside it."""

from __future__ import annotations

import errno
import os
import stat
import types
from pathlib import Path

import pytest
import trainform.specs.file_writes as file_writes
from trainform.specs.errors import FileWriteError, SpecError
from trainform.specs.file_writes import write_file


def refusing(monkeypatch: pytest.MonkeyPatch, name: str, code: int = errno.ENOSPC) -> None:
    """Make `os.<name>` fail with `code`, as file_writes sees it (only there)."""

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    fake = types.SimpleNamespace(**{key: getattr(os, key) for key in dir(os)})
    setattr(fake, name, fail)
    monkeypatch.setattr(file_writes, "os", fake)


def test_a_file_is_replaced_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "trainform.lock"
    target.write_text("old\n")
    target.chmod(0o640)
    write_file(target, "new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["trainform.lock"]


def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path: Path) -> None:
    umask = os.umask(0o027)
    try:
        write_file(tmp_path / "plan.json", b"{}")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "plan.json").stat().st_mode) == 0o640


@pytest.mark.parametrize("step", ["fsync", "replace", "chmod"])
def test_a_full_disk_leaves_the_old_file_and_no_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    target = tmp_path / "plan.json"
    target.write_text("the previous plan")
    refusing(monkeypatch, step)
    with pytest.raises(FileWriteError) as raised:
        write_file(target, "x" * 100_000)
    assert str(raised.value) == f"cannot write {target}: No space left on device"
    assert isinstance(raised.value, SpecError)
    assert target.read_text() == "the previous plan"
    assert os.listdir(tmp_path) == ["plan.json"]


def test_a_file_that_cannot_be_created_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder" / "plan.json"
    with pytest.raises(FileWriteError) as raised:
        write_file(missing, "{}")
    assert str(raised.value) == f"cannot write {missing}: No such file or directory"


def test_a_link_is_followed_and_its_target_replaced(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    write_file(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink()
    assert (tmp_path / "real.json").read_text() == "new"


def test_a_special_file_is_written_in_place(tmp_path: Path) -> None:
    """A rename would replace a FIFO (or /dev/stdout) with a plain file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_file(fifo, "through the pipe")
        assert os.read(reader, 100) == b"through the pipe"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert os.listdir(tmp_path) == ["pipe"]
