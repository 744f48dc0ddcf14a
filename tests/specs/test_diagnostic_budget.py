"""One budget of diagnostics per run: the first ones as always, then one line counting the
rest, with no positions worked out and no diagnostics held past the budget.

Most cases load in-process with the run's budget made small (MAX_DIAGNOSTICS_PER_RUN is
read when a load starts); one runs `trainform validate` with the real budget.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trainform.specs.positions as positions
from trainform.specs import Diagnostic, Severity, SpecLoadError, load_specs
from trainform.specs.diagnostic_budget import (
    MAX_DIAGNOSTICS_PER_RUN,
    DiagnosticBudget,
    cap_per_run,
)
from trainform.specs.errors import Location

from tests.helpers import BASE, CONFIG, run_cli, training_job, write_tree

LIMIT = 20


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr("trainform.specs.diagnostic_budget.MAX_DIAGNOSTICS_PER_RUN", LIMIT)
    return LIMIT


def typo_job(number: int) -> str:
    """A job whose `command` is spelt `comand` (line 8): one problem, `unknown-field`."""
    return training_job(name=f"job-{number}").replace("  command:", "  comand:")


def spec_folder(root: Path, files: dict[str, str | bytes]) -> Path:
    write_tree(root, {"trainform.yaml": CONFIG, "base.yaml": BASE, **files})
    return root


def errors_of(root: Path) -> list[Diagnostic]:
    with pytest.raises(SpecLoadError) as raised:
        load_specs(root)
    return raised.value.diagnostics


def test_a_run_shows_its_first_diagnostics_then_counts_the_rest(
    tmp_path: Path, small_budget: int
) -> None:
    files = {f"jobs/{n:03d}.yaml": typo_job(n) for n in range(small_budget + 15)}
    found = errors_of(spec_folder(tmp_path, files))
    assert len(found) == small_budget + 1
    first, last = found[0], found[-1]
    assert (str(first.location), first.field, first.code) == (
        f"{tmp_path}/jobs/000.yaml:8:3",
        "spec.comand",
        "unknown-field",
    )
    assert first.suggestion == "command"
    assert [d.code for d in found[:-1]] == ["unknown-field"] * small_budget
    assert last.code == "too-many-diagnostics"
    assert last.severity is Severity.ERROR
    assert last.location is None
    assert last.summary == "at least 15 more problems not shown"


def test_the_count_line_sorts_after_every_located_diagnostic() -> None:
    count = Diagnostic(Severity.ERROR, "too-many-diagnostics", "1 more problem not shown")
    located = Diagnostic(Severity.ERROR, "unknown-field", "x", Location("z.yaml", 9, 1))
    unlocated = Diagnostic(Severity.ERROR, "not-a-folder", "y")
    ordered = sorted([count, located, unlocated], key=Diagnostic.sort_key)
    assert ordered == [unlocated, located, count]


def test_a_typo_and_the_missing_field_it_explains_count_as_one_problem(
    tmp_path: Path, small_budget: int
) -> None:
    """At the edge of the budget the typo is shown, not the `missing command` it causes."""
    job = typo_job(0).replace("  image: trainer\n", "  image: trainer\n  bogus: 1\n")
    files = {f"jobs/{n:03d}.yaml": typo_job(n) for n in range(1, small_budget)}
    found = errors_of(spec_folder(tmp_path, {"jobs/000.yaml": job, **files}))
    codes = [d.code for d in found]
    assert "missing-field" not in codes
    assert codes[-1] == "too-many-diagnostics"
    assert found[-1].summary == "at least 1 more problem not shown"  # `comand` or `bogus`


def test_number_warnings_are_not_sought_past_the_budget(tmp_path: Path, small_budget: int) -> None:
    """A `yaml-number` warning needs a walk of the text; past the budget (as past a file's
    room) none is looked for, and a run with only warnings still succeeds."""
    jobs = "---\n".join(
        training_job(name=f"job-{n}", parameters="{version: 1.10}") for n in range(small_budget + 5)
    )
    loaded = load_specs(spec_folder(tmp_path, {"jobs.yaml": jobs}))
    assert [d.code for d in loaded.warnings] == ["yaml-number"] * small_budget


def test_errors_left_out_after_a_budget_of_warnings_still_fail_the_run(
    tmp_path: Path, small_budget: int
) -> None:
    warned = "---\n".join(
        training_job(name=f"job-{n}", parameters="{version: 1.10}") for n in range(small_budget)
    )
    found = errors_of(spec_folder(tmp_path, {"a.yaml": warned, "b.yaml": typo_job(99)}))
    assert [d.severity for d in found[:-1]] == [Severity.WARNING] * small_budget
    assert found[-1].code == "too-many-diagnostics"
    assert found[-1].severity is Severity.ERROR


def test_no_position_is_worked_out_past_the_budget(
    tmp_path: Path, small_budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    real = positions.source_map

    def counting(text: str, duplicates: bool = False) -> positions.SourceMap | positions.EventMap:
        built.append(text)
        return real(text, duplicates)

    monkeypatch.setattr(positions, "source_map", counting)
    files = {f"jobs/{n:03d}.yaml": typo_job(n) for n in range(small_budget * 10)}
    found = errors_of(spec_folder(tmp_path, files))
    assert found[-1].summary == f"at least {small_budget * 9:,} more problems not shown"
    assert len(built) == small_budget


@pytest.mark.parametrize(
    ("write", "code", "line"),
    [
        pytest.param(
            lambda n: training_job(name=f"job-{n}").replace("queue: training", "queue: nowhere"),
            "unknown-reference",
            5,
            id="unresolved-reference",
        ),
        pytest.param(
            lambda n: training_job(name=f"job-{n}", extra="  queue: again\n"),
            "duplicate-key",
            11,
            id="duplicate-key",
        ),
        pytest.param(lambda n: "just text\n", "not-a-mapping", 1, id="not-a-mapping"),
    ],
)
def test_every_kind_of_problem_shares_the_run_budget(
    tmp_path: Path, small_budget: int, write: Callable[[int], str], code: str, line: int
) -> None:
    files = {f"jobs/{n:03d}.yaml": write(n) for n in range(small_budget * 3)}
    found = errors_of(spec_folder(tmp_path, files))
    assert [d.code for d in found[:-1]] == [code] * small_budget
    assert [d.location.line for d in found[:-1] if d.location] == [line] * small_budget
    assert found[-1].code == "too-many-diagnostics"
    assert found[-1].summary.endswith(f"{small_budget * 2:,} more problems not shown")


def test_files_parsed_by_the_second_core_get_exact_positions_while_there_is_room(
    tmp_path: Path, small_budget: int
) -> None:
    """Over 1 MB, the second half of the files is parsed by a forked child, which works out
    no position: the parent parses again those of its files the run still shows."""
    padding = "# padding\n" * 3_000  # 30 KB a file, 1.2 MB in all
    files = {
        f"jobs/{n:03d}.yaml": padding
        + training_job(name=f"job-{n}", extra="  queue: again\n" if n >= 15 else "")
        for n in range(40)
    }  # the first half: base.yaml and jobs 000-018, 4 of them with a duplicate key
    found = errors_of(spec_folder(tmp_path, files))
    shown = found[:-1]
    assert len(shown) == small_budget
    assert {d.code for d in shown} == {"duplicate-key"}
    assert [d.location.line for d in shown if d.location] == [3_011] * small_budget
    assert str(shown[-1].location) == f"{tmp_path}/jobs/034.yaml:3011:3"  # the child's
    assert found[-1].summary == "5 more problems not shown"


def test_the_budget_keeps_the_first_diagnostics_and_counts_the_others() -> None:
    budget = DiagnosticBudget(2)
    made = [Diagnostic(Severity.WARNING, "w", str(n)) for n in range(3)]
    budget.extend(made)
    assert budget.kept == made[:2]
    assert budget.spent and budget.room == 0
    budget.omit(4)
    line = budget.count_line()
    assert line is not None and line.severity is Severity.ERROR
    assert line.summary == "at least 5 more problems not shown"
    assert DiagnosticBudget(2).count_line() is None


def test_cap_per_run_leaves_a_list_that_fits_as_it_is() -> None:
    few = [Diagnostic(Severity.ERROR, "e", "x")]
    assert cap_per_run(few, 1) is few
    capped = cap_per_run(few * 3 + [Diagnostic(Severity.WARNING, "w", "y")], 2)
    assert [d.code for d in capped] == ["e", "e", "too-many-diagnostics"]
    assert capped[-1].severity is Severity.ERROR
    assert capped[-1].summary == "2 more problems not shown"


@pytest.mark.slow
def test_validate_of_many_invalid_files_prints_a_bounded_report(tmp_path: Path) -> None:
    count = MAX_DIAGNOSTICS_PER_RUN + 200
    root = spec_folder(
        tmp_path / "specs", {f"jobs/{n:04d}.yaml": typo_job(n) for n in range(count)}
    )
    result = run_cli("validate", str(root))
    assert result.returncode == 1
    assert "internal error" not in result.stderr
    output = result.stdout
    assert len(output.encode()) < 1_000_000
    assert output.count("error[unknown-field]") == MAX_DIAGNOSTICS_PER_RUN
    assert f"{root}/jobs/0000.yaml:8:3" in output
    assert "error[too-many-diagnostics]: at least 200 more problems not shown" in output
