"""Golden diagnostics: each case folder's specs, validated, must print exactly what is expected.

A case is `tests/golden/diagnostics/<case>/` with a spec folder `specs/` and the expected
output of `trainform validate specs` run from the case folder (so paths read
`specs/queue.yaml:12:7`): `expected.txt` (text, no colour) and `expected.json`.
`pytest --update-golden` rewrites the expected files from the current output; review the
diff before committing it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from trainform.cli import cli

from tests.helpers import run_cli

CASES_DIR = Path(__file__).parent / "golden" / "diagnostics"
CASES = sorted(path.name for path in CASES_DIR.iterdir() if (path / "specs").is_dir())
FORMATS = {"text": "expected.txt", "json": "expected.json"}
# Cases named for a diagnostic code must report that code (and only errors of it).
MIXED_CASES = {"all-six"}


def validate_in(case: str, output_format: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(CASES_DIR / case)
    runner = CliRunner(env={"NO_COLOR": "1", "FORCE_COLOR": None})
    result = runner.invoke(cli, ["validate", "specs", "--format", output_format])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


def check_golden(path: Path, actual: str, update: bool) -> None:
    if update or not path.exists():
        path.write_text(actual, encoding="utf-8")
        if not update:
            pytest.fail(f"{path} did not exist; written, review it and run again")
        return
    assert actual == path.read_text(encoding="utf-8")


def test_there_is_a_case_per_diagnostic_class() -> None:
    expected = {
        "unknown-field", "missing-field", "invalid-value", "unknown-kind", "unknown-reference",
        "wrong-kind", "duplicate-name", "duplicate-key", "reference-cycle", "unknown-version",
        "undefined-variable", "yaml-syntax", "alias-limit", "missing-project", "unknown-provider",
        "all-six",
    }  # fmt: skip
    assert expected <= set(CASES)


@pytest.mark.parametrize("output_format", sorted(FORMATS))
@pytest.mark.parametrize("case", CASES)
def test_validate_output_matches_golden(
    case: str, output_format: str, update_golden: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    exit_code, output = validate_in(case, output_format, monkeypatch)
    assert exit_code == 1
    check_golden(CASES_DIR / case / FORMATS[output_format], output, update_golden)


@pytest.mark.parametrize("case", CASES)
def test_every_golden_diagnostic_points_at_a_file_line_and_column(case: str) -> None:
    report = json.loads((CASES_DIR / case / "expected.json").read_text(encoding="utf-8"))
    assert report["valid"] is False
    assert report["errorCount"] == len(report["diagnostics"]) > 0
    for diagnostic in report["diagnostics"]:
        location = diagnostic["location"]
        assert location["file"].startswith("specs/"), diagnostic
        assert location["line"] >= 1 and location["column"] >= 1, diagnostic
        assert diagnostic["summary"], diagnostic
        for related in diagnostic["related"]:
            assert related["file"].startswith("specs/") and related["line"] >= 1, diagnostic
    if case not in MIXED_CASES:
        assert {d["code"] for d in report["diagnostics"]} == {case}


def test_text_and_json_goldens_agree_on_what_is_reported() -> None:
    for case in CASES:
        report = json.loads((CASES_DIR / case / "expected.json").read_text(encoding="utf-8"))
        text = (CASES_DIR / case / "expected.txt").read_text(encoding="utf-8")
        for diagnostic in report["diagnostics"]:
            location = diagnostic["location"]
            header = f"error[{diagnostic['code']}]: {diagnostic['summary']}"
            assert header in text, (case, header)
            assert f"--> {location['file']}:{location['line']}:{location['column']}" in text


def test_all_six_problems_are_reported_in_one_run_by_the_installed_command() -> None:
    result = run_cli("validate", "specs", cwd=CASES_DIR / "all-six")
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr == ""
    codes = [line.split("]")[0].removeprefix("error[") for line in result.stdout.splitlines()
             if line.startswith("error[")]  # fmt: skip
    assert sorted(codes) == sorted(
        [
            "unknown-field",
            "unknown-reference",
            "reference-cycle",
            "duplicate-key",
            "invalid-value",
            "undefined-variable",
        ]
    )
    assert "did you mean `nominalQuota`?" in result.stdout
    assert "6 errors, 0 warnings in 5 files" in result.stdout
    assert result.stdout == (CASES_DIR / "all-six" / "expected.txt").read_text(encoding="utf-8")


def test_all_six_json_from_the_installed_command_matches_golden() -> None:
    result = run_cli("validate", "specs", "--format", "json", cwd=CASES_DIR / "all-six")
    assert result.returncode == 1
    assert result.stderr == ""
    assert result.stdout == (CASES_DIR / "all-six" / "expected.json").read_text(encoding="utf-8")
