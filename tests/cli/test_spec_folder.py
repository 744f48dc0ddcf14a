"""Spec folder rules on the command line: trainform.yaml required, `.trainformignore`,
hidden folders skipped, `trainform init` and `trainform fmt [--check]`."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from tests.helpers import CONFIG, PROJECT, run_cli, write_tree

NOT_A_SPEC = "services:\n  web: {image: nginx}\n"  # docker-compose: no kind, not a spec


def test_a_folder_without_trainform_yaml_is_refused(tmp_path: Path) -> None:
    write_tree(tmp_path / "specs", {"project.yaml": PROJECT})
    for command in ("validate", "plan", "fmt"):
        result = run_cli(command, "specs", cwd=tmp_path)
        assert result.returncode == 1, command
        output = result.stdout + result.stderr
        assert "specs is not a spec folder: it has no trainform.yaml at its root" in output
        assert "trainform init specs" in output


def test_ignored_and_hidden_files_are_not_read_as_specs(tmp_path: Path) -> None:
    files = {
        "trainform.yaml": CONFIG,
        "project.yaml": PROJECT,
        "docker-compose.yaml": NOT_A_SPEC,
        "charts/web/values.yaml": NOT_A_SPEC,
        "charts/web/keep.yaml": NOT_A_SPEC,
        ".github/workflows/ci.yaml": NOT_A_SPEC,
    }
    write_tree(tmp_path / "specs", files)
    unignored = run_cli("validate", "specs", cwd=tmp_path)
    assert unignored.returncode == 1
    assert "specs/docker-compose.yaml" in unignored.stdout
    assert "specs/charts/web/values.yaml" in unignored.stdout
    assert ".github" not in unignored.stdout  # hidden folders are skipped by default

    (tmp_path / "specs" / ".trainformignore").write_text(
        "# not specs\ndocker-compose*.yaml\ncharts/\n!charts/web/keep.yaml\n"
    )
    ignored = run_cli("validate", "specs", cwd=tmp_path)
    assert ignored.returncode == 0, ignored.stdout
    assert "Success: 1 resource in 1 file is valid" in ignored.stdout


def test_init_writes_a_folder_that_validates_and_keeps_existing_files(tmp_path: Path) -> None:
    first = run_cli("init", "new", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "new"
    for name in ("trainform.yaml", ".trainformignore", ".gitignore", ".vscode/settings.json"):
        assert f"wrote {name}" in first.stdout
        assert (folder / name).is_file()
    assert run_cli("validate", "new", cwd=tmp_path).returncode == 0
    assert ".trainform/" in (folder / ".gitignore").read_text().splitlines()
    isolation = yaml.safe_load((folder / "trainform.yaml").read_text())["policies"]["settings"]
    assert isolation["project-isolation"]["adminPaths"] == ["platform/**"]

    config_text = (folder / "trainform.yaml").read_text()
    assert config_text.startswith("# yaml-language-server: $schema=.schemas/config.schema.json\n")
    config_schema = json.loads((folder / ".schemas/config.schema.json").read_text())
    jsonschema.validate(yaml.safe_load(config_text), config_schema)
    document_schema = json.loads((folder / ".schemas/trainform.schema.json").read_text())
    jsonschema.validate(yaml.safe_load(PROJECT), document_schema)
    settings = json.loads((folder / ".vscode/settings.json").read_text())
    assert settings["yaml.schemas"]["./.schemas/config.schema.json"] == ["trainform.yaml"]

    (folder / "trainform.yaml").write_text(CONFIG)
    again = run_cli("init", "new", cwd=tmp_path)
    assert again.returncode == 0
    assert "kept  trainform.yaml (exists)" in again.stdout
    assert (folder / "trainform.yaml").read_text() == CONFIG


MESSY = """\
# the research project
apiVersion: trainform/v1
kind: Project   # a tenant
metadata:
    name: research
spec:
    owners:
    -   ml-platform@example.com
    displayName: 'Research'
---
# second document, order kept
apiVersion: trainform/v1
kind: Project
metadata: {name: other,   project: null}
spec: {owners: [a@example.com]}
"""

TIDY = """\
# the research project
apiVersion: trainform/v1
kind: Project   # a tenant
metadata:
  name: research
spec:
  owners:
    - ml-platform@example.com
  displayName: 'Research'
---
# second document, order kept
apiVersion: trainform/v1
kind: Project
metadata: {name: other, project: null}
spec: {owners: [a@example.com]}
"""


def test_fmt_check_lists_what_would_change_and_fmt_rewrites_keeping_comments(
    tmp_path: Path,
) -> None:
    write_tree(
        tmp_path / "specs",
        {"trainform.yaml": CONFIG, "projects.yaml": MESSY, "charts/x.yaml": MESSY,
         ".trainformignore": "charts/\n"},
    )  # fmt: skip
    projects = tmp_path / "specs" / "projects.yaml"
    check = run_cli("fmt", "--check", "specs", cwd=tmp_path)
    assert check.returncode == 2
    assert check.stdout == (
        "would reformat specs/projects.yaml\n1 of 2 files would be reformatted.\n"
    )
    assert projects.read_text() == MESSY

    done = run_cli("fmt", "specs", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reformatted specs/projects.yaml" in done.stdout
    assert projects.read_text() == TIDY
    assert (tmp_path / "specs" / "charts" / "x.yaml").read_text() == MESSY  # ignored
    again = run_cli("fmt", "--check", "specs", cwd=tmp_path)
    assert (again.returncode, again.stdout) == (0, "2 files already formatted.\n")
    assert run_cli("validate", "specs", cwd=tmp_path).returncode == 0


def test_fmt_writes_nothing_when_a_file_does_not_parse(tmp_path: Path) -> None:
    write_tree(
        tmp_path / "specs",
        {"trainform.yaml": CONFIG, "a.yaml": MESSY, "b.yaml": "kind: [unclosed\n"},
    )
    result = run_cli("fmt", "specs", cwd=tmp_path)
    assert result.returncode == 1
    assert "error[yaml-syntax]: invalid YAML: unclosed bracket" in result.stdout
    assert "--> specs/b.yaml:1:7" in result.stdout
    assert "Nothing was formatted." in result.stderr
    assert (tmp_path / "specs" / "a.yaml").read_text() == MESSY
