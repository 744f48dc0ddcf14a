"""Loading spec folders: files, YAML, templates, validation and references, end to end."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trainform.specs as specs
from trainform.specs import (
    Diagnostic,
    SpecError,
    SpecLoadError,
    SpecSet,
    SpecUsageError,
    load_specs,
)
from trainform.specs.yamlio import MAX_FILE_BYTES, parse_file

from tests.helpers import (
    BASE,
    CONFIG,
    IMAGE,
    POOL,
    PROJECT,
    QUEUE,
    REPO,
    run_cli,
    training_job,
    write_tree,
)

Files = dict[str, str | bytes]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[Files], str]:
    """Write a spec folder `specs/` and return its relative name, so paths read `specs/x.yaml`."""
    monkeypatch.chdir(tmp_path)

    def make(files: Files) -> str:
        write_tree(tmp_path / "specs", {"trainform.yaml": "apiVersion: trainform/v1\n", **files})
        return "specs"

    return make


def errors_of(root: str, **options: Any) -> list[Diagnostic]:
    with pytest.raises(SpecLoadError) as info:
        load_specs(root, **options)
    assert info.value.diagnostics, "SpecLoadError without diagnostics"
    return info.value.diagnostics


def only(diagnostics: list[Diagnostic], code: str) -> Diagnostic:
    matching = [d for d in diagnostics if d.code == code]
    assert len(matching) == 1, [(d.code, d.summary) for d in diagnostics]
    return matching[0]


def where(diagnostic: Diagnostic) -> str:
    return str(diagnostic.location)


def with_config(*documents: str, **more: str) -> Files:
    return {"trainform.yaml": CONFIG, "base.yaml": BASE, **more} | (
        {"extra.yaml": "---\n".join(documents)} if documents else {}
    )


# Files and documents


def test_multi_document_file_yields_each_document_at_its_line(folder) -> None:
    loaded = load_specs(folder({"trainform.yaml": CONFIG, "all.yaml": BASE}))
    assert list(loaded.resources) == [
        "Project/research",
        "ResourcePool/a100",
        "Queue/training",
        "Image/trainer",
        "Dataset/corpus",
    ]
    lines = [resource.location.line for resource in loaded.resources.values()]
    assert lines == [1, 6, 11, 19, 24]  # a document starts at its first line after `---`
    assert {r.location.file for r in loaded.resources.values()} == {"specs/all.yaml"}


def test_leading_comments_and_separators_do_not_shift_document_lines(folder) -> None:
    text = "# platform\n\n---\n" + PROJECT + "---\n# next\n" + POOL + "---\n"
    loaded = load_specs(folder({"trainform.yaml": CONFIG, "a.yaml": text}))
    assert [r.location.line for r in loaded.resources.values()] == [4, 10]


def test_files_load_in_path_order_whatever_the_creation_order(folder) -> None:
    root = folder(
        {
            "trainform.yaml": CONFIG,
            "z/queue.yaml": QUEUE,
            "b.yaml": POOL,
            "a/project.yaml": PROJECT,
            "a/nested/image.yml": IMAGE,
            ".hidden/ignored.yaml": "not: [valid",
            ".skipped.yaml": "not: [valid",
            "notes.txt": "not: [valid",
        }
    )
    loaded = load_specs(root)
    assert loaded.files == [
        "specs/a/nested/image.yml",
        "specs/a/project.yaml",
        "specs/b.yaml",
        "specs/z/queue.yaml",
    ]
    assert list(loaded.resources) == [
        "Image/trainer",
        "Project/research",
        "ResourcePool/a100",
        "Queue/training",
    ]


def test_two_loads_give_identical_results(folder) -> None:
    root = folder(with_config(training_job()))
    first, second = load_specs(root), load_specs(root)
    assert list(first.resources) == list(second.resources)
    for address, resource in first.resources.items():
        assert resource.document == second.resources[address].document
        assert resource.dependencies == second.resources[address].dependencies


def test_empty_folder_loads_nothing(folder) -> None:
    loaded = load_specs(folder({}))
    assert isinstance(loaded, SpecSet)
    assert loaded.resources == {}
    assert loaded.config.providers == []


# YAML 1.2 scalars


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        pytest.param("no", "no", id="no-is-a-string"),
        pytest.param("on", "on", id="on-is-a-string"),
        pytest.param("yes", "yes", id="yes-is-a-string"),
        pytest.param("off", "off", id="off-is-a-string"),
        pytest.param("0777", 777, id="leading-zero-is-decimal"),
        pytest.param("0o17", 15, id="octal-needs-0o"),
        pytest.param("1.10", 1.1, id="version-like-is-a-float"),
        pytest.param("true", True, id="true-is-a-bool"),
        pytest.param("2024-06-01", "2024-06-01", id="date-stays-a-string"),
        pytest.param("'0777'", "0777", id="quoted-stays-a-string"),
    ],
)
def test_parameters_follow_yaml_1_2_scalars(folder, scalar: str, value: Any) -> None:
    root = folder(with_config(training_job(parameters=f"{{p: {scalar}}}")))
    loaded = load_specs(root)
    parameter = loaded.resources["TrainingJob/research/bigram"].document.spec.parameters["p"]
    assert parameter == value
    assert type(parameter) is type(value)


def test_parse_file_keeps_yaml_1_2_scalars(tmp_path: Path) -> None:
    path = tmp_path / "scalars.yaml"
    path.write_text("a: no\nb: on\nc: 0777\nd: 1.10\ne: ~\nf: 0x1F\n", encoding="utf-8")
    parsed = parse_file(path, "scalars.yaml")
    assert parsed.diagnostics == []
    assert parsed.documents == [{"a": "no", "b": "on", "c": 777, "d": 1.1, "e": None, "f": 31}]


def test_parse_file_splits_documents_with_their_start_lines(tmp_path: Path) -> None:
    path = tmp_path / "docs.yaml"
    path.write_text("# head\na: 1\n---\n---\nb: 2\n---\n- c\n", encoding="utf-8")
    parsed = parse_file(path, "docs.yaml")
    assert parsed.documents == [{"a": 1}, {"b": 2}, ["c"]]
    assert parsed.start_lines == [2, 5, 7]


# YAML-level problems


def test_duplicate_key_is_an_error_at_the_second_key(folder) -> None:
    text = "apiVersion: trainform/v1\nkind: Project\nmetadata:\n  name: a\n  name: b\n"
    diagnostic = only(errors_of(folder({"p.yaml": text})), "duplicate-key")
    assert where(diagnostic) == "specs/p.yaml:5:3"
    assert "name" in diagnostic.summary


def billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        previous, current = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{current}: &{current} [" + ", ".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_fails_fast_with_alias_limit(folder) -> None:
    root = folder({"lol.yaml": billion_laughs()})
    started = time.perf_counter()
    diagnostics = errors_of(root)
    assert time.perf_counter() - started < 2
    assert where(only(diagnostics, "alias-limit")).startswith("specs/lol.yaml:")


def test_few_aliases_are_fine(folder) -> None:
    text = POOL.replace("cpu: 64", "cpu: &cpu 64").replace("512Gi}", "512Gi, x: *cpu}")
    diagnostics = errors_of(folder({"trainform.yaml": CONFIG, "p.yaml": text}))
    assert [d.code for d in diagnostics] == ["unknown-field"]  # the alias itself is fine


def test_file_too_large_is_refused_without_parsing(folder) -> None:
    big = "a: 1\n" + "#" * MAX_FILE_BYTES
    diagnostic = only(errors_of(folder({"big.yaml": big})), "file-too-large")
    assert where(diagnostic) == "specs/big.yaml:1:1"
    assert str(MAX_FILE_BYTES) in diagnostic.expected


def test_deep_nesting_is_refused(folder) -> None:
    deep = "a: " + "[" * 200 + "]" * 200 + "\n"
    diagnostics = errors_of(folder({"deep.yaml": deep}))
    assert diagnostics[0].code in {"nesting-too-deep", "yaml-syntax"}
    assert where(diagnostics[0]).startswith("specs/deep.yaml:")


def test_moderate_nesting_past_the_limit_is_refused(folder) -> None:
    deep = "a: " + "[" * 40 + "]" * 40 + "\n"
    only(errors_of(folder({"deep.yaml": deep})), "nesting-too-deep")


def test_non_utf8_file_is_an_encoding_error_at_the_byte(folder) -> None:
    diagnostic = only(
        errors_of(folder({"latin1.yaml": "a: 1\nb: caf\xe9\n".encode("latin-1")})), "encoding"
    )
    assert where(diagnostic) == "specs/latin1.yaml:2:7"
    assert diagnostic.found == "byte 0xe9"


def test_yaml_syntax_error_names_line_and_column(folder) -> None:
    diagnostic = only(errors_of(folder({"bad.yaml": "a: 1\nb: [1, 2\n"})), "yaml-syntax")
    assert diagnostic.location is not None
    assert diagnostic.location.file == "specs/bad.yaml"
    assert diagnostic.location.line >= 2


def test_top_level_list_is_not_a_document(folder) -> None:
    diagnostic = only(
        errors_of(folder({"list.yaml": "- " + PROJECT.replace("\n", "\n  ")})), "not-a-mapping"
    )
    assert where(diagnostic) == "specs/list.yaml:1:1"
    assert diagnostic.found == "a list"


def test_document_after_an_end_marker_is_located_on_its_own_line(folder) -> None:
    text = "a: 1\n...\n---\nb: 2\n...\nc: 3\n"
    diagnostics = errors_of(folder({"ends.yaml": text}))
    assert [where(d) for d in diagnostics] == [
        "specs/ends.yaml:1:1",
        "specs/ends.yaml:4:1",
        "specs/ends.yaml:6:1",
    ]


# Validation


def test_unknown_field_suggests_closest_name(folder) -> None:
    text = QUEUE.replace("nominalQuota", "nominalQuta")
    diagnostics = errors_of(folder({"trainform.yaml": CONFIG, "q.yaml": POOL + "---\n" + text}))
    diagnostic = only(diagnostics, "unknown-field")
    assert where(diagnostic) == "specs/q.yaml:12:7"
    assert diagnostic.suggestion == "nominalQuota"
    assert diagnostic.field == "spec.pools[0].nominalQuta"
    assert diagnostic.address == "Queue/training"
    assert "`nominalQuota`" in diagnostic.expected


def test_unknown_kind_suggests_closest_kind(folder) -> None:
    text = PROJECT.replace("kind: Project", "kind: Projet")
    diagnostic = only(errors_of(folder({"p.yaml": text})), "unknown-kind")
    assert where(diagnostic) == "specs/p.yaml:2:7"
    assert diagnostic.suggestion == "Project"
    assert diagnostic.found == "Projet"


def test_missing_required_field_points_at_its_parent(folder) -> None:
    text = POOL.replace("nodes: 2, ", "")
    diagnostic = only(
        errors_of(folder({"trainform.yaml": CONFIG, "p.yaml": text})), "missing-field"
    )
    assert diagnostic.summary == "missing required field `nodes`"
    assert diagnostic.field == "spec.nodes"
    assert where(diagnostic) == "specs/p.yaml:4:7"


def test_bad_quantity_names_the_value_and_what_was_expected(folder) -> None:
    text = POOL.replace("512Gi", "512GB")
    diagnostic = only(
        errors_of(folder({"trainform.yaml": CONFIG, "p.yaml": text})), "invalid-value"
    )
    assert diagnostic.field == "spec.memory"
    assert where(diagnostic) == "specs/p.yaml:4:52"
    assert diagnostic.found == "'512GB'"
    assert "500m" in diagnostic.summary


def test_every_problem_is_reported_in_one_load(folder) -> None:
    root = folder(
        {
            "a.yaml": PROJECT.replace("owners", "ownrs"),
            "b.yaml": "a: 1\na: 2\n",
            "c.yaml": POOL.replace("64,", "many,"),
            "d.yaml": QUEUE.replace("kind: Queue", "kind: Queeu"),
        }
    )
    assert [(d.location.file, d.code) for d in errors_of(root)] == [
        ("specs/a.yaml", "unknown-field"),
        # b.yaml is still validated (last value wins): it is no spec document either.
        ("specs/b.yaml", "unknown-kind"),
        ("specs/b.yaml", "duplicate-key"),
        ("specs/c.yaml", "invalid-value"),
        ("specs/d.yaml", "unknown-kind"),
    ]


def test_misspelled_required_field_is_one_error_not_two(folder) -> None:
    diagnostics = errors_of(folder({"a.yaml": PROJECT.replace("owners", "ownrs")}))
    assert [(d.code, d.suggestion) for d in diagnostics] == [("unknown-field", "owners")]


def test_diagnostics_are_sorted_by_file_and_line(folder) -> None:
    root = folder(
        {
            "b.yaml": PROJECT.replace("owners", "ownrs"),
            "a.yaml": POOL.replace("nodes: 2", "nodes: 0")
            + "---\n"
            + QUEUE.replace("pool:", "pol:"),
        }
    )
    keys = [(d.location.file, d.location.line, d.location.column) for d in errors_of(root)]
    assert keys == sorted(keys)
    assert keys[0][0] == "specs/a.yaml"


def test_invalid_root_config_is_reported_in_trainform_yaml(folder) -> None:
    config = CONFIG + "stat: {backend: local}\n"
    diagnostic = only(errors_of(folder({"trainform.yaml": config})), "unknown-field")
    assert where(diagnostic) == "specs/trainform.yaml:4:1"
    assert diagnostic.suggestion == "state"


# References


def test_wrong_kind_reference_names_both_kinds(folder) -> None:
    root = folder(with_config(training_job(image="corpus")))
    diagnostic = only(errors_of(root), "wrong-kind")
    assert diagnostic.summary == "`corpus` is a Dataset, but spec.image must name an Image"
    assert where(diagnostic) == "specs/extra.yaml:6:10"
    assert [str(r) for r in diagnostic.related] == ["specs/base.yaml:24:1"]


def test_unknown_reference_suggests_a_visible_name(folder) -> None:
    root = folder(with_config(training_job(image="traner")))
    diagnostic = only(errors_of(root), "unknown-reference")
    assert diagnostic.suggestion == "trainer"
    assert diagnostic.field == "spec.image"
    assert diagnostic.address == "TrainingJob/research/bigram"
    assert where(diagnostic) == "specs/extra.yaml:6:10"


def test_duplicate_name_names_both_files(folder) -> None:
    root = folder(with_config(**{"more/queue.yaml": QUEUE}))
    diagnostic = only(errors_of(root), "duplicate-name")
    assert where(diagnostic) == "specs/more/queue.yaml:3:18"
    assert [str(r) for r in diagnostic.related] == ["specs/base.yaml:13:18"]
    assert "specs/base.yaml:13:18" in diagnostic.found


def test_same_name_in_different_projects_is_not_a_duplicate(folder) -> None:
    other = PROJECT.replace("research", "vision")
    image = IMAGE.replace("{name: trainer}", "{name: trainer, project: research}")
    loaded = load_specs(
        folder(with_config(other, image, image.replace("project: research", "project: vision")))
    )
    assert {"Image/trainer", "Image/research/trainer", "Image/vision/trainer"} <= set(
        loaded.resources
    )


def test_undeclared_dataset_version_suggests_a_declared_one(folder) -> None:
    root = folder(with_config(training_job(datasets="[corpus@v01]")))
    diagnostic = only(errors_of(root), "unknown-version")
    assert diagnostic.suggestion == "corpus@v1"
    assert diagnostic.found == "v01"
    assert "`v1`, `v2`" in diagnostic.expected
    assert where(diagnostic) == "specs/extra.yaml:7:14"
    assert [str(r) for r in diagnostic.related] == ["specs/base.yaml:24:1"]


def test_project_scoped_resource_shadows_a_global_one(folder) -> None:
    project_image = IMAGE.replace("{name: trainer}", "{name: trainer, project: research}")
    loaded = load_specs(folder(with_config(training_job(), project_image)))
    job = loaded.resources["TrainingJob/research/bigram"]
    images = [d.address for d in job.dependencies if d.reference.kind == "Image"]
    assert images == ["Image/research/trainer"]


def test_global_resource_is_found_when_the_project_has_none(folder) -> None:
    loaded = load_specs(folder(with_config(training_job())))
    job = loaded.resources["TrainingJob/research/bigram"]
    assert [d.address for d in job.dependencies] == [
        "Project/research",
        "Queue/training",
        "Image/trainer",
        "Dataset/corpus",
    ]


def test_another_projects_resource_is_not_visible_without_its_prefix(folder) -> None:
    other = PROJECT.replace("research", "vision")
    base = BASE.replace("{name: trainer}", "{name: trainer, project: vision}")
    root = folder(
        {
            "trainform.yaml": CONFIG,
            "base.yaml": base,
            "extra.yaml": other + "---\n" + training_job(),
        }
    )
    diagnostic = only(errors_of(root), "unknown-reference")
    assert diagnostic.summary == "Image `trainer` is not declared in project `research` or globally"


def test_project_prefix_names_another_projects_resource(folder) -> None:
    other = PROJECT.replace("research", "vision")
    baseline_job = training_job(name="base").replace("project: research", "project: vision")
    suite = (
        "apiVersion: trainform/v1\nkind: EvalSuite\nmetadata: {name: mmlu, project: research}\n"
        "spec:\n  image: trainer\n  command: [eval]\n  metrics: [{name: acc, goal: maximize}]\n"
        "  gates: [{metric: acc, op: '>=', threshold: 0, baseline: {job: vision/base}}]\n"
    )
    loaded = load_specs(folder(with_config(other, baseline_job, suite)))
    suite_resource = loaded.resources["EvalSuite/research/mmlu"]
    assert "TrainingJob/vision/base" in [d.address for d in suite_resource.dependencies]


def test_reference_to_an_invalid_resource_is_not_reported_twice(folder) -> None:
    base = BASE.replace("registry.example.com/ml/trainer:v1", "Registry/Trainer")
    root = folder({"trainform.yaml": CONFIG, "base.yaml": base, "job.yaml": training_job()})
    diagnostics = errors_of(root)
    assert [d.code for d in diagnostics] == ["invalid-value"]
    assert diagnostics[0].address == "Image/trainer"


def test_a_reference_typo_shows_beside_a_schema_error_of_its_document(folder) -> None:
    job = training_job(image="traner", datasets="[corpus@v01]", extra="  retriez: 3\n")
    diagnostics = errors_of(folder(with_config(job)))
    found = {d.code: d for d in diagnostics}
    assert sorted(found) == ["unknown-field", "unknown-reference", "unknown-version"]
    assert found["unknown-field"].suggestion == "retries"
    assert found["unknown-reference"].suggestion == "trainer"
    assert found["unknown-reference"].address == "TrainingJob/research/bigram"
    assert where(found["unknown-reference"]) == "specs/extra.yaml:6:10"
    assert found["unknown-version"].suggestion == "corpus@v1"


def test_validate_shows_the_reference_typo_and_the_schema_error_in_one_run(folder) -> None:
    job = training_job(image="traner", extra="  retriez: 3\n")
    done = run_cli("validate", folder(with_config(job)), cwd=Path.cwd())
    assert done.returncode == 1, done.stdout + done.stderr
    text = done.stdout + done.stderr
    assert "error[unknown-field]: unknown field `retriez`" in text
    assert "error[unknown-reference]: Image `traner` is not declared" in text
    assert "2 errors" in text


def test_a_reference_field_with_its_own_schema_error_is_reported_once(folder) -> None:
    job = training_job(image="Not_A_Name", extra="  retriez: 3\n")
    codes = sorted(d.code for d in errors_of(folder(with_config(job))))
    assert codes == ["invalid-value", "unknown-field"]


def promoted_image(name: str, source: str) -> str:
    return (
        "apiVersion: trainform/v1\n"
        "kind: Image\n"
        f"metadata: {{name: {name}}}\n"
        f'spec: {{reference: "registry.example.com/ml/{name}:v1", promotedFrom: {source}}}\n'
    )


def test_reference_cycle_names_every_file_and_line(folder) -> None:
    images = {
        "a.yaml": promoted_image("img-a", "img-b"),
        "b.yaml": promoted_image("img-b", "img-c"),
        "c.yaml": promoted_image("img-c", "img-a"),
    }
    diagnostic = only(errors_of(folder(images)), "reference-cycle")
    assert diagnostic.summary == (
        "reference cycle: Image/img-a -> Image/img-b -> Image/img-c -> Image/img-a"
    )
    assert where(diagnostic) == "specs/a.yaml:4:69"
    assert [str(r) for r in diagnostic.related] == ["specs/b.yaml:4:69", "specs/c.yaml:4:69"]


def test_training_job_initialised_from_itself_is_a_cycle(folder) -> None:
    job = training_job(extra="  initFrom: {job: bigram}\n")
    diagnostic = only(errors_of(folder(with_config(job))), "reference-cycle")
    assert diagnostic.summary.endswith("TrainingJob/research/bigram -> TrainingJob/research/bigram")


def test_unknown_provider_suggests_a_declared_one(folder) -> None:
    root = folder(
        {"trainform.yaml": CONFIG, "p.yaml": POOL.replace("provider: local", "provider: locl")}
    )
    diagnostic = only(errors_of(root), "unknown-provider")
    assert diagnostic.suggestion == "local"
    assert where(diagnostic) == "specs/p.yaml:4:18"


def test_provider_of_the_wrong_type_is_an_error(folder) -> None:
    config = CONFIG + "  - {name: s3, type: objectstore}\n"
    root = folder(
        {"trainform.yaml": config, "p.yaml": POOL.replace("provider: local", "provider: s3")}
    )
    diagnostic = only(errors_of(root), "wrong-provider-type")
    assert "local or kubernetes or slurm" in diagnostic.expected


# Scope


def test_quota_without_project_is_a_scope_error(folder) -> None:
    quota = (
        "apiVersion: trainform/v1\nkind: Quota\nmetadata: {name: q}\n"
        "spec: {queue: training, limits: {gpu: 1}}\n"
    )
    diagnostic = only(errors_of(folder(with_config(quota))), "missing-project")
    assert diagnostic.field == "metadata.project"
    assert where(diagnostic) == "specs/extra.yaml:3:11"


def test_queue_with_a_project_is_a_scope_error(folder) -> None:
    queue = QUEUE.replace("{name: training}", "{name: other, project: research}")
    diagnostic = only(errors_of(folder(with_config(queue))), "project-not-allowed")
    assert diagnostic.found == "research"
    assert where(diagnostic) == "specs/extra.yaml:3:34"


# Templates

TEMPLATED_CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local}
variables:
  team: research
  steps: from-config
  source: from-config
environments:
  dev: {variables: {steps: from-env, source: from-env}}
  prod:
    variables: {steps: from-prod, source: from-prod}
    state: {backend: local, path: .trainform/prod/state.json}
    providers: {local: {root: .trainform/prod}}
"""


def templated(parameters: str, config: str = TEMPLATED_CONFIG, **more: str) -> Files:
    job = training_job(parameters=parameters)
    return {"trainform.yaml": config, "base.yaml": BASE, "job.yaml": job, **more}


def parameters_of(loaded: SpecSet) -> dict[str, Any]:
    return dict(loaded.resources["TrainingJob/research/bigram"].document.spec.parameters)


def test_undefined_template_variable_suggests_and_points_at_the_value(folder) -> None:
    root = folder(templated('{steps: "{{ stesp }}"}'))
    diagnostic = only(errors_of(root), "undefined-variable")
    assert diagnostic.summary == "template variable `stesp` is not defined"
    assert diagnostic.suggestion == "steps"
    assert diagnostic.field == "spec.parameters.steps"
    assert where(diagnostic) == "specs/job.yaml:9:23"


def test_undefined_variable_in_a_later_document_points_at_its_line(folder) -> None:
    image = IMAGE.replace('"registry.example.com/ml/trainer:v1"', '"{{ registry }}/trainer:v1"')
    root = folder({"trainform.yaml": TEMPLATED_CONFIG, "a.yaml": PROJECT + "---\n" + image})
    diagnostic = only(errors_of(root), "undefined-variable")
    assert where(diagnostic) == "specs/a.yaml:9:19"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({}, {"steps": "from-config", "source": "from-config"}, id="config-only"),
        pytest.param(
            {"environment": "dev"},
            {"steps": "from-env", "source": "from-env"},
            id="env-over-config",
        ),
        pytest.param(
            {"environment": "dev", "var_files": ["vars.yaml"]},
            {"steps": "from-file", "source": "from-file"},
            id="var-file-over-env",
        ),
        pytest.param(
            {"environment": "dev", "var_files": ["vars.yaml"], "variables": ["steps=from-cli"]},
            {"steps": "from-cli", "source": "from-file"},
            id="cli-var-wins",
        ),
        pytest.param(
            {"variables": ["steps=a=b"]},
            {"steps": "a=b", "source": "from-config"},
            id="cli-var-value-may-contain-equals",
        ),
    ],
)
def test_variable_precedence_is_config_env_file_then_cli(
    folder, tmp_path: Path, options: dict[str, Any], expected: dict[str, str]
) -> None:
    (tmp_path / "vars.yaml").write_text("steps: from-file\nsource: from-file\n", encoding="utf-8")
    root = folder(templated('{steps: "{{ steps }}", source: "{{ source }}"}'))
    assert parameters_of(load_specs(root, **options)) == expected


def test_default_environment_applies_when_none_is_selected(folder) -> None:
    config = TEMPLATED_CONFIG + "defaultEnvironment: prod\n"
    loaded = load_specs(folder(templated('{steps: "{{ steps }}"}', config=config)))
    assert loaded.environment == "prod"
    assert parameters_of(loaded) == {"steps": "from-prod"}


def test_selected_environment_is_a_template_variable(folder) -> None:
    loaded = load_specs(folder(templated('{env: "{{ environment }}"}')), environment="dev")
    assert parameters_of(loaded) == {"env": "dev"}


def test_unknown_environment_is_a_usage_error_with_suggestion(folder) -> None:
    root = folder(templated("{}"))
    with pytest.raises(SpecUsageError, match=r"`prd`.*did you mean `prod`"):
        load_specs(root, environment="prd")


@pytest.mark.parametrize(
    "pair",
    [
        pytest.param("steps", id="no-equals"),
        pytest.param("=1", id="no-name"),
        pytest.param(" =1", id="blank-name"),
    ],
)
def test_malformed_var_is_a_usage_error(folder, pair: str) -> None:
    with pytest.raises(SpecUsageError, match="NAME=VALUE"):
        load_specs(folder(templated("{}")), variables=[pair])


def test_var_file_that_is_not_a_mapping_is_a_usage_error(folder, tmp_path: Path) -> None:
    (tmp_path / "vars.yaml").write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(SpecUsageError, match="--var-file"):
        load_specs(folder(templated("{}")), var_files=["vars.yaml"])


def test_templates_are_rendered_once(folder) -> None:
    root = folder(templated('{steps: "{{ raw }}"}'))
    loaded = load_specs(root, variables={"raw": "{{ steps }}"})
    assert parameters_of(loaded) == {"steps": "{{ steps }}"}


def test_template_output_cannot_inject_yaml_structure(folder) -> None:
    root = folder(templated('{steps: "{{ raw }}"}'))
    loaded = load_specs(root, variables={"raw": "1\nextra: {injected: true}"})
    assert parameters_of(loaded) == {"steps": "1\nextra: {injected: true}"}


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param("''.__class__", id="dunder-class"),
        pytest.param("''.__class__.__mro__[1].__subclasses__()", id="subclasses"),
        pytest.param("cycler.__init__.__globals__", id="globals"),
        pytest.param("[].append(1)", id="mutation"),
    ],
)
def test_sandbox_refusal_is_a_diagnostic(folder, expression: str) -> None:
    root = folder(templated(f'{{x: "{{{{ {expression} }}}}"}}'))
    diagnostic = only(errors_of(root), "template-error")
    assert "sandbox" in diagnostic.summary
    assert where(diagnostic) == "specs/job.yaml:9:19"


SANDBOX_PROBE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
from trainform.specs import SpecLoadError, load_specs
try:
    load_specs(sys.argv[1])
except SpecLoadError as exc:
    print(" ".join(sorted(d.code for d in exc.diagnostics)))
"""


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param("10 ** (10 ** 9)", id="huge-power"),
        pytest.param("'a' * 10 ** 12", id="huge-repetition"),
        pytest.param("'%099999999999d' % 1", id="huge-format-width"),
    ],
)
def test_sandbox_refuses_templates_that_exhaust_time_or_memory(folder, expression: str) -> None:
    root = folder(templated(f'{{x: "{{{{ {expression} }}}}"}}'))
    try:
        probe = subprocess.run(
            [sys.executable, "-c", SANDBOX_PROBE, str(Path(root).resolve())],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"rendering `{{{{ {expression} }}}}` did not finish in 5 s")
    assert probe.stdout.split() == ["template-error"], probe.stderr[-2000:]


def test_template_syntax_error_is_a_diagnostic(folder) -> None:
    diagnostic = only(errors_of(folder(templated('{x: "{{ steps "}'))), "template-error")
    assert "syntax" in diagnostic.summary


def test_templated_name_is_rendered_before_validation(folder) -> None:
    project = PROJECT.replace("{name: research}", '{name: "{{ team }}"}')
    base = BASE.replace(PROJECT, project)
    loaded = load_specs(folder({"trainform.yaml": TEMPLATED_CONFIG, "base.yaml": base}))
    assert "Project/research" in loaded.resources


# Errors leaving load_specs


def test_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SpecUsageError, match="is not a folder"):
        load_specs(tmp_path / "absent")


def test_file_instead_of_folder_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(PROJECT, encoding="utf-8")
    with pytest.raises(SpecUsageError):
        load_specs(tmp_path / "a.yaml")


def test_load_errors_are_spec_errors() -> None:
    assert issubclass(SpecLoadError, SpecError)
    assert issubclass(SpecUsageError, SpecError)
    assert specs.SpecError is SpecError


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"a.yaml": b"\xff\xfe\x00"}, id="binary"),
        pytest.param({"a.yaml": "{{ }}: [\n"}, id="broken-template-and-yaml"),
        pytest.param({"a.yaml": "? [a, b]\n: c\n"}, id="complex-key"),
        pytest.param(
            {
                "a.yaml": "apiVersion: trainform/v1\nkind: Queue\n"
                "metadata: {name: x}\nspec: {1: 2}\n"
            },
            id="integer-key",
        ),
        pytest.param({"a.yaml": "apiVersion: trainform/v1\nkind: [Queue]\n"}, id="list-kind"),
        pytest.param(
            {"a.yaml": "apiVersion: trainform/v1\nkind: Queue\nmetadata: 7\n"}, id="scalar-metadata"
        ),
        pytest.param({"trainform.yaml": "- a\n"}, id="config-is-a-list"),
        pytest.param({"trainform.yaml": "a: [\n"}, id="config-syntax-error"),
    ],
)
def test_hostile_input_raises_only_spec_load_error(folder, files: Files) -> None:
    with pytest.raises(SpecLoadError):
        load_specs(folder(files))
