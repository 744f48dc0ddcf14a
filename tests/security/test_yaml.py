"""YAML edge cases: tags refused where they are, duplicate keys beside the file's other
errors, diagnostics capped per file, and numbers YAML reads differently from how they were
written flagged with a `yaml-number` warning.

Every case is a real `trainform validate` on a spec folder; positions are asserted as
file:line:column.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainform.specs import SpecError, SpecLoadError, load_specs

from tests.helpers import CONFIG, run_cli, training_job
from tests.security.support import write_platform


def validate(root: Path) -> tuple[int, str]:
    result = run_cli("validate", str(root))
    assert "Traceback" not in result.stderr and "internal error" not in result.stdout
    return result.returncode, result.stdout


def codes(output: str) -> list[str]:
    return re.findall(r"^(?:error|warning)\[([a-z-]+)\]", output, re.MULTILINE)


@pytest.mark.parametrize(
    ("extra", "tag", "where"),
    [
        pytest.param(
            "  env: !!python/object/new:os.system [touch pwned]\n",
            "!!python/object/new:os.system",
            "jobs.yaml:11:8",
            id="python-object-on-a-sequence",
        ),
        pytest.param(
            "  env: {A: !!python/name:os.system }\n",
            "!!python/name:os.system",
            "jobs.yaml:11:12",
            id="python-name",
        ),
        pytest.param("  env: {A: !secret value}\n", "!secret", "jobs.yaml:11:12", id="local-tag"),
        pytest.param("  env: {A: !!binary aGVsbG8=}\n", "!!binary", "jobs.yaml:11:12", id="binary"),
        pytest.param(
            "  env: {A: !!timestamp 2001-12-14}\n", "!!timestamp", "jobs.yaml:11:12", id="timestamp"
        ),
        pytest.param("  env: !!set {A: null}\n", "!!set", "jobs.yaml:11:8", id="set"),
    ],
)
def test_tag_is_refused_at_its_line_and_column(
    tmp_path: Path, extra: str, tag: str, where: str
) -> None:
    root = write_platform(tmp_path / "specs", {"jobs.yaml": training_job(extra=extra)})
    code, output = validate(root)
    assert code == 1
    # What yaml-rs made of the tagged value is still validated (a list is no `env`).
    assert set(codes(output)) <= {"yaml-tag", "invalid-value"}
    assert re.search(rf"yaml-tag\]: YAML tag `{re.escape(tag)}`.*\n.*{where}\n", output)


def test_apply_tag_executes_nothing(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    extra = f'  command: !!python/object/apply:os.system ["touch {canary}"]\n'
    root = write_platform(tmp_path / "specs", {"jobs.yaml": training_job() + "---\n" + extra})
    code, output = validate(root)
    assert code == 1
    assert "yaml-tag" in codes(output)
    assert not canary.exists()


def test_tag_in_trainform_yaml_is_a_diagnostic_not_an_internal_error(tmp_path: Path) -> None:
    config = CONFIG + "variables: {lr: !!python/object/new:dict {}, steps: !!set {a: null}}\n"
    root = write_platform(tmp_path / "specs", {}, config=config)
    code, output = validate(root)
    assert code == 1
    assert codes(output) == ["yaml-tag", "yaml-tag"]
    assert "trainform.yaml:4:17" in output
    assert "trainform.yaml:4:53" in output


def test_standard_tags_and_bangs_that_are_not_tags_are_accepted(tmp_path: Path) -> None:
    extra = (
        "  env:\n"
        "    A: !!str 12\n"
        '    B: "- !not-a-tag"\n'
        "    C: 'x: !neither'  # a comment: !nor-this\n"
        "    D: |\n"
        "      !block text\n"
        "    E: wow!\n"
    )
    root = write_platform(tmp_path / "specs", {"jobs.yaml": training_job(extra=extra)})
    code, output = validate(root)
    assert code == 0, output
    job = load_specs(root).resources["TrainingJob/research/bigram"].document
    assert job.spec.env["A"] == "12"
    assert job.spec.env["D"] == "!block text\n"


def test_duplicate_key_is_reported_with_the_files_other_errors(tmp_path: Path) -> None:
    jobs = (
        training_job(extra="  queue: training\n")  # line 11 repeats `queue`
        + "---\n"
        + training_job(name="other", image="7")
        + "---\n"
        + training_job(name="third", extra="  unknownField: 1\n")
    )
    root = write_platform(tmp_path / "specs", {"jobs.yaml": jobs})
    code, output = validate(root)
    assert code == 1
    assert codes(output) == ["duplicate-key", "invalid-value", "unknown-field"]
    assert "jobs.yaml:11:3" in output
    assert "jobs.yaml:18:10" in output  # image: 7, in the second document
    assert "jobs.yaml:34:3" in output  # unknownField, in the third


def test_documents_of_a_file_with_a_duplicate_key_are_never_loaded(tmp_path: Path) -> None:
    jobs = training_job(extra="  queue: training\n") + "---\n" + training_job(name="other")
    root = write_platform(tmp_path / "specs", {"jobs.yaml": jobs})
    with pytest.raises(SpecLoadError) as raised:
        load_specs(root)
    assert [d.code for d in raised.value.diagnostics] == ["duplicate-key"]


def test_a_huge_list_of_wrong_values_gives_a_bounded_report(tmp_path: Path) -> None:
    command = "[" + ", ".join(["1"] * 60_000) + "]"  # more values than a document may hold
    jobs = training_job().replace("command: [python, train.py]", f"command: {command}")
    root = write_platform(tmp_path / "specs", {"jobs.yaml": jobs})
    code, output = validate(root)
    assert code == 1
    found = codes(output)
    assert found.count("invalid-value") <= 100
    assert found[0] == "document-too-large"
    assert found[-1] == "too-many-diagnostics"
    assert "jobs.yaml:8:13" in output  # the first wrong value: command[0]
    assert len(output) < 100_000


def test_diagnostics_are_capped_at_one_hundred_per_file(tmp_path: Path) -> None:
    jobs = "---\n".join(
        training_job(name=f"job-{number}", image=f"no-such-image-{number}") for number in range(150)
    )
    root = write_platform(tmp_path / "specs", {"jobs.yaml": jobs, "other.yaml": "a: 1\n"})
    code, output = validate(root)
    assert code == 1
    found = codes(output)
    assert found.count("unknown-reference") == 100
    assert "error[too-many-diagnostics]: 50 more problems in this file not shown" in output
    assert "other.yaml:1:1" in output  # other files keep their own diagnostics


@pytest.mark.parametrize(
    ("written", "read_as"),
    [
        pytest.param("1.10", "1.1", id="trailing-zero"),
        pytest.param("0777", "777", id="leading-zero"),
        pytest.param("1e3", "1000.0", id="exponent"),
        pytest.param("0x1F", "31", id="hex"),
        pytest.param("1_000", "1000", id="underscore"),
    ],
)
def test_number_that_reads_differently_in_a_parameter_is_a_warning(
    tmp_path: Path, written: str, read_as: str
) -> None:
    parameters = f"{{lr: 0.001, decay: 1e-4, steps: 10, v: {written}}}"
    root = write_platform(tmp_path / "specs", {"jobs.yaml": training_job(parameters=parameters)})
    code, output = validate(root)
    assert code == 0, output
    assert codes(output) == ["yaml-number"]
    assert f"`{written}` is read as the number {read_as}" in output
    assert "jobs.yaml:9:54" in output
    assert "spec.parameters.v" in output


def test_number_in_a_text_field_gets_the_hint_beside_its_error(tmp_path: Path) -> None:
    root = write_platform(
        tmp_path / "specs", {"jobs.yaml": training_job(extra="  env: {VERSION: 1.10}\n")}
    )
    code, output = validate(root)
    assert code == 1
    assert codes(output) == ["invalid-value", "yaml-number"]
    assert output.count("jobs.yaml:11:18") == 2


def test_number_in_a_template_variable_of_trainform_yaml_is_a_warning(tmp_path: Path) -> None:
    config = CONFIG + "variables:\n  version: 1.10\n  steps: 100\n"
    root = write_platform(tmp_path / "specs", {}, config=config)
    code, output = validate(root)
    assert code == 0, output
    assert codes(output) == ["yaml-number"]
    assert "trainform.yaml:5:12" in output


def test_quoted_and_canonical_numbers_are_quiet(tmp_path: Path) -> None:
    parameters = "{a: '1.10', b: \"0777\", c: 1.5, d: 2.0, e: 1e-4, f: 100, g: yes}"
    root = write_platform(tmp_path / "specs", {"jobs.yaml": training_job(parameters=parameters)})
    code, output = validate(root)
    assert code == 0
    assert "warning" not in output


# Random tags anywhere a value goes: the loader raises only its own error type, and every
# tag outside the standard set is reported as a `yaml-tag`.
TAG = st.one_of(
    st.sampled_from(["!!str", "!!int", "!!python/name:os.system", "!!python/object:x", "!"]),
    st.from_regex(r"\A!!?[a-z][a-z0-9/:._-]{0,20}\Z"),
)
VALUE = st.sampled_from(["1", "x", "[1, 2]", "{a: 1}", '"q"', ""])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tags=st.lists(st.tuples(TAG, VALUE), min_size=1, max_size=4))
def test_random_tags_are_refused_and_only_spec_errors_escape(tmp_path_factory, tags) -> None:
    env = "".join(f"    K{number}: {tag} {value}\n" for number, (tag, value) in enumerate(tags))
    root = write_platform(
        tmp_path_factory.mktemp("tags"), {"jobs.yaml": training_job(extra="  env:\n" + env)}
    )
    standard = {"!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq"}
    try:
        load_specs(root)
    except SpecLoadError as exc:
        found = [d for d in exc.diagnostics if d.code == "yaml-tag"]
        refused = [tag for tag, _ in tags if tag not in standard]
        if refused:
            assert found, [d.as_dict() for d in exc.diagnostics]
            assert all(d.location is not None and d.location.line >= 12 for d in found)
    except SpecError:
        pass
