"""Output within bounds: `--max-chars` cuts whole diagnostics with a line saying how many,
in text (validate) and where a plan in Markdown was asked for; a file or output the disk
has no room for is an error naming it (exit 1), never an internal error, and leaves no
temporary file."""

from __future__ import annotations

import errno
import os
import subprocess
import types
from pathlib import Path

import pytest
import trainform.specs.file_writes as file_writes
from trainform.cli.commands import run

from tests.helpers import CONFIG, PROJECT, TRAINFORM, run_cli, training_job, write_tree
from tests.security.support import write_platform

NOTE = "more diagnostics not shown: the output is limited to {:,} characters (--max-chars)"


def broken_folder(root: Path, count: int = 40) -> Path:
    """A spec folder of `count` files, each with one unknown field (`comand`, line 8)."""
    jobs = {
        f"jobs/{n:02d}.yaml": training_job(name=f"job-{n}").replace("  command:", "  comand:")
        for n in range(count)
    }
    return write_platform(root, jobs)


def test_validate_max_chars_cuts_whole_diagnostics_and_says_how_many(tmp_path: Path) -> None:
    root = broken_folder(tmp_path / "specs")
    result = run_cli("validate", str(root), "--max-chars", "3000")
    assert result.returncode == 1
    output = result.stdout
    assert len(output) <= 3000
    assert output.startswith("error[unknown-field]: unknown field `comand`\n")
    assert f"  --> {root}/jobs/00.yaml:8:3\n" in output
    shown = output.count("error[unknown-field]")
    assert f"\n... {40 - shown:,} {NOTE.format(3000)}\n" in output
    assert output.endswith("\n40 errors, 0 warnings in 40 files\n")


def test_validate_without_max_chars_shows_every_diagnostic(tmp_path: Path) -> None:
    result = run_cli("validate", str(broken_folder(tmp_path / "specs")))
    assert result.stdout.count("error[unknown-field]") == 40
    assert "--max-chars" not in result.stdout


def test_plan_in_markdown_of_invalid_specs_stays_within_max_chars(tmp_path: Path) -> None:
    root = broken_folder(tmp_path / "specs")
    result = run_cli("plan", str(root), "--format", "markdown", "--max-chars", "5000")
    assert result.returncode == 1
    assert len(result.stdout) <= 5000
    assert NOTE.format(5000) in result.stdout
    assert result.stdout.endswith("\n40 errors, 0 warnings in 40 files\n")


def test_max_chars_below_the_minimum_is_refused(tmp_path: Path) -> None:
    result = run_cli("validate", str(broken_folder(tmp_path / "specs", 1)), "--max-chars", "10")
    assert result.returncode == 1
    assert "Invalid value for '--max-chars': 10 is not in the range x>=2000" in result.stderr


def full_disk_for_file_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """specs.file_writes sees a disk with no room: its fsync fails with ENOSPC."""

    def no_room(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    fake = types.SimpleNamespace(**{key: getattr(os, key) for key in dir(os)})
    fake.fsync = no_room
    monkeypatch.setattr(file_writes, "os", fake)


def test_plan_out_on_a_full_disk_names_the_file_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "specs"
    write_tree(folder, {"trainform.yaml": CONFIG, "project.yaml": PROJECT})
    saved = tmp_path / "saved"
    saved.mkdir()
    full_disk_for_file_writes(monkeypatch)
    monkeypatch.setenv("NO_COLOR", "1")
    code = run(["plan", str(folder), "-out", str(saved / "p.json")])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err == f"error: cannot write {saved / 'p.json'}: No space left on device\n"
    assert "internal error" not in captured.err + captured.out
    assert os.listdir(saved) == []


def test_schema_output_on_a_full_disk_is_an_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    full_disk_for_file_writes(monkeypatch)
    code = run(["schema", "-o", str(tmp_path / "schema.json")])
    assert code == 1
    assert capsys.readouterr().err == (
        f"error: cannot write {tmp_path / 'schema.json'}: No space left on device\n"
    )
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(
    not os.path.exists("/dev/full") and os.environ.get("CI") != "true",
    reason="needs /dev/full (Linux); in CI its absence fails the test",
)
def test_output_to_a_full_disk_is_an_error_not_an_internal_one(tmp_path: Path) -> None:
    root = broken_folder(tmp_path / "specs", 3)
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [str(TRAINFORM), "validate", str(root)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "NO_COLOR": "1"},
        )
    assert result.returncode == 1
    assert result.stderr == "error: cannot write the output: No space left on device\n"
