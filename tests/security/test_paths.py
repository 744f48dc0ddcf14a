"""Every file reference is confined to the spec folder or a data root trainform.yaml declares.

The CLI cases are real `trainform validate` and `plan` runs on a spec folder written for
the attack: a dataset source that climbs out, is absolute, is a file:// URI outside every
data root, or passes through a link leading out; a spec file or folder that links out of
the folder, to /proc/self/environ included; a FIFO named like a spec. Each must exit 1
with a `path-escape` (or `special-file`) diagnostic naming the file, and never print a
byte of what lies outside. The property tests feed generated paths (`..`, `.`, `/`, NUL,
newlines, leading dashes, links in a temporary tree) to the confinement helper, the
validate check and the provider, and check with os.path.realpath that whatever they accept
is inside.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from trainform.providers.base import DesiredResource, ProviderContext
from trainform.providers.errors import PermanentProviderError
from trainform.providers.local.datasets import resolve_source
from trainform.providers.local.layout import RunLayout
from trainform.providers.local.machine import MachineFacts
from trainform.providers.local.provider import LocalProvider
from trainform.specs.confinement import PathEscape, confined_path, is_within
from trainform.specs.data_sources import check_data_sources
from trainform.specs.errors import Location
from trainform.specs.models.config import RootConfig
from trainform.specs.models.kinds import DOCUMENT_ADAPTER
from trainform.specs.resource import Resource

from tests.helpers import CONFIG, run_cli, write_tree

CANARY_NAME = "TRAINFORM_CANARY_SECRET"
CANARY_VALUE = "s3cr3t-canary"


def dataset(source: str, name: str = "corpus", versions: str = "[{name: v1}]") -> str:
    """A global Dataset (source on line 6, column 11) of the local provider."""
    return (
        "apiVersion: trainform/v1\n"
        "kind: Dataset\n"
        f"metadata: {{name: {name}}}\n"
        "spec:\n"
        "  format: text\n"
        f"  source: {json.dumps(source)}\n"
        f"  versions: {versions}\n"
    )


def config_with(data_roots: Sequence[str] = (), extra: str = "") -> str:
    roots = f"security: {{dataRoots: {json.dumps(list(data_roots))}}}\n" if data_roots else ""
    return CONFIG + roots + extra


def folder(tmp_path: Path, files: dict[str, str | bytes], config: str = CONFIG) -> Path:
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": config, **files})
    return root


def diagnostics(result: Any) -> list[dict[str, Any]]:
    return json.loads(result.stdout)["diagnostics"]  # type: ignore[no-any-return]


def escapes(
    result: Any, code: str = "path-escape", field: str | None = None
) -> list[dict[str, Any]]:
    return [
        d
        for d in diagnostics(result)
        if d["code"] == code and (field is None or d["field"] == field)
    ]


def canary_env() -> dict[str, str]:
    return {CANARY_NAME: CANARY_VALUE}


# Dataset sources ------------------------------------------------------------------------


ESCAPING_SOURCES = [
    pytest.param("../../etc", "resolves outside the spec folder", id="climbs-out"),
    pytest.param("/", "absolute path", id="root"),
    pytest.param("/etc", "absolute path", id="absolute"),
    pytest.param("file:///etc", "absolute location", id="file-uri"),
    pytest.param("file://etc", "without an absolute path", id="file-uri-without-path"),
    pytest.param("data/../../../etc", "resolves outside the spec folder", id="climbs-deeper"),
]


@pytest.mark.parametrize(("source", "reason"), ESCAPING_SOURCES)
def test_validate_refuses_a_dataset_source_outside_the_spec_folder(
    tmp_path: Path, source: str, reason: str
) -> None:
    root = folder(tmp_path, {"data.yaml": dataset(source)})

    result = run_cli("validate", "--format", "json", str(root))

    assert result.returncode == 1, result.stdout + result.stderr
    [found] = escapes(result)
    assert found["field"] == "spec.source"
    assert found["location"] == {"file": f"{root}/data.yaml", "line": 6, "column": 11}
    assert found["found"] == source
    assert "security.dataRoots" in found["expected"]
    assert reason in found["detail"]


@pytest.mark.parametrize(("source", "reason"), ESCAPING_SOURCES[:4])
def test_plan_refuses_a_dataset_source_outside_the_spec_folder(
    tmp_path: Path, source: str, reason: str
) -> None:
    root = folder(tmp_path, {"data.yaml": dataset(source)})

    result = run_cli("plan", str(root), cwd=root)

    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "error[path-escape]" in output
    assert "data.yaml:6:11" in output
    assert "will perform" not in output
    assert not (root / ".trainform" / "platform.db").exists()


def test_a_dataset_folder_linked_out_of_the_spec_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "host-data"
    write_tree(outside, {"corpus/v1/part-0.txt": "host data\n"})
    root = folder(tmp_path, {"data.yaml": dataset("data/corpus")})
    (root / "data").mkdir()
    (root / "data" / "corpus").symlink_to(outside / "corpus")

    validated = run_cli("validate", "--format", "json", str(root))
    planned = run_cli("plan", str(root), cwd=root)

    assert validated.returncode == 1, validated.stdout
    [found] = escapes(validated, field="spec.source")
    assert "through a symbolic link" in found["detail"]
    assert planned.returncode == 1
    assert "error[path-escape]" in planned.stdout + planned.stderr


def test_a_version_folder_linked_out_of_its_source_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "host-data"
    write_tree(outside, {"part-0.txt": "host data\n"})
    root = folder(tmp_path, {"data.yaml": dataset("data", versions="[{name: v1, path: current}]")})
    (root / "data").mkdir()
    (root / "data" / "current").symlink_to(outside)

    result = run_cli("validate", "--format", "json", str(root))

    assert result.returncode == 1
    [found] = escapes(result, field="spec.versions[0].path")
    assert found["found"] == "current"


def test_a_file_uri_under_a_declared_data_root_validates_and_plans(tmp_path: Path) -> None:
    data_root = tmp_path / "datasets"
    write_tree(data_root, {"corpus/v1/part-0.txt": "hello\n"})
    root = folder(
        tmp_path,
        {"data.yaml": dataset(f"file://{data_root}/corpus")},
        config_with([str(data_root)]),
    )

    validated = run_cli("validate", str(root))
    planned = run_cli("plan", str(root), cwd=root)

    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "Dataset/corpus will be created" in planned.stdout


def test_a_file_uri_beside_a_declared_data_root_is_refused(tmp_path: Path) -> None:
    data_root = tmp_path / "datasets"
    data_root.mkdir()
    (data_root / "escape").symlink_to(tmp_path)
    sources = [f"file://{data_root}/../elsewhere", f"file://{data_root}/escape/specs"]
    files = {f"data{i}.yaml": dataset(s, name=f"d{i}") for i, s in enumerate(sources)}
    root = folder(tmp_path, files, config_with([str(data_root)]))

    result = run_cli("validate", "--format", "json", str(root))

    assert result.returncode == 1
    assert len(escapes(result)) == 2
    assert all("under no data root" in d["detail"] for d in escapes(result))


def test_a_relative_source_stays_under_a_file_storage_base(tmp_path: Path) -> None:
    base = tmp_path / "store"
    write_tree(base, {"corpus/v1/a.txt": "x\n"})
    storage = f"storage: {{datasets: 'file://{base}'}}\n"
    files = {"ok.yaml": dataset("corpus", name="ok"), "bad.yaml": dataset("../specs", name="bad")}
    root = folder(tmp_path, files, config_with(extra=storage))

    result = run_cli("validate", "--format", "json", str(root))

    assert result.returncode == 1
    [found] = escapes(result)
    assert found["address"] == "Dataset/bad"
    assert "storage.datasets base" in found["detail"]


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("../../elsewhere", id="climbs-out"),
        pytest.param("/etc/cron.d", id="absolute"),
        pytest.param("file:///etc", id="file-uri"),
        pytest.param("ckpt/../../../x", id="climbs-from-inside"),
    ],
)
def test_a_checkpoint_prefix_cannot_leave_its_storage(tmp_path: Path, prefix: str) -> None:
    job = (
        "apiVersion: trainform/v1\nkind: Project\nmetadata: {name: research}\n"
        "spec: {owners: [a@example.com]}\n---\n"
        "apiVersion: trainform/v1\nkind: ResourcePool\nmetadata: {name: cpu}\n"
        "spec: {provider: local, nodes: 1, cpu: 1, memory: 1Gi}\n---\n"
        "apiVersion: trainform/v1\nkind: Queue\nmetadata: {name: q}\n"
        "spec: {pools: [{pool: cpu, nominalQuota: {cpu: 1, memory: 1Gi}}]}\n---\n"
        "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: host}\n"
        "spec: {runtime: host}\n---\n"
        "apiVersion: trainform/v1\nkind: TrainingJob\n"
        "metadata: {name: j, project: research}\n"
        "spec:\n  queue: q\n  image: host\n  command: [python3, train.py]\n"
        "  resources: {cpu: 1, memory: 1Gi}\n"
        f"  checkpoint: {{interval: 1m, prefix: {json.dumps(prefix)}}}\n"
    )
    root = folder(tmp_path, {"platform.yaml": job})

    result = run_cli("validate", "--format", "json", str(root))

    assert result.returncode == 1, result.stdout
    [found] = escapes(result)
    assert found["field"] == "spec.checkpoint.prefix"
    assert (
        found["location"]["line"]
        == job.splitlines().index(next(line for line in job.splitlines() if "checkpoint:" in line))
        + 1
    )


# Spec files and folders -------------------------------------------------------------------


def test_a_spec_file_linked_to_the_process_environment_is_refused_unread(
    tmp_path: Path,
) -> None:
    root = folder(tmp_path, {"data.yaml": dataset("data")})
    (root / "environ.yaml").symlink_to("/proc/self/environ")

    for arguments in (("validate", str(root)), ("validate", "--format", "json", str(root))):
        result = run_cli(*arguments, env=canary_env())
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert CANARY_VALUE not in output
        assert CANARY_NAME not in output
        assert "environ.yaml" in output
        assert "leads outside the spec folder" in output
    [found] = escapes(result)
    assert found["location"]["file"] == f"{root}/environ.yaml"
    planned = run_cli("plan", str(root), cwd=root, env=canary_env())
    assert planned.returncode == 1
    assert CANARY_VALUE not in planned.stdout + planned.stderr


def test_a_spec_file_linked_to_a_secret_file_never_quotes_it(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text(f"{CANARY_NAME}: [{CANARY_VALUE}\n", encoding="utf-8")  # broken YAML
    root = folder(tmp_path, {})
    (root / "team").mkdir()
    (root / "team" / "jobs.yaml").symlink_to(secret)

    result = run_cli("validate", str(root))

    assert result.returncode == 1
    assert CANARY_VALUE not in result.stdout + result.stderr
    assert "team/jobs.yaml is a symbolic link that leads outside" in result.stdout


def test_a_spec_folder_linked_out_of_the_spec_folder_is_refused_unread(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    write_tree(elsewhere, {"leak.yaml": f"{CANARY_NAME}: {{{CANARY_VALUE}\n"})
    root = folder(tmp_path, {"data.yaml": dataset("data")})
    (root / "teams").symlink_to(elsewhere)

    result = run_cli("validate", "--format", "json", str(root))

    assert result.returncode == 1
    assert CANARY_VALUE not in result.stdout + result.stderr
    [found] = escapes(result)
    assert found["location"]["file"] == f"{root}/teams"


def test_trainform_yaml_linked_out_of_the_spec_folder_is_refused_unread(
    tmp_path: Path,
) -> None:
    root = tmp_path / "specs"
    write_tree(root, {"data.yaml": dataset("data")})
    (root / "trainform.yaml").symlink_to("/proc/self/environ")

    result = run_cli("validate", str(root), env=canary_env())

    assert result.returncode == 1
    assert CANARY_VALUE not in result.stdout + result.stderr
    assert "trainform.yaml is a symbolic link that leads outside" in result.stdout


def test_a_fifo_named_like_a_spec_is_refused_without_opening_it(tmp_path: Path) -> None:
    root = folder(tmp_path, {"data.yaml": dataset("data")})
    os.mkfifo(root / "pipe.yaml")  # opening it for reading would block the run forever

    result = run_cli("validate", "--format", "json", str(root))

    assert result.returncode == 1
    [found] = escapes(result, "special-file")
    assert found["location"]["file"] == f"{root}/pipe.yaml"


def test_links_in_a_loop_neither_hang_nor_pass(tmp_path: Path) -> None:
    root = folder(tmp_path, {"data.yaml": dataset("data")})
    (root / "a.yaml").symlink_to(root / "b.yaml")
    (root / "b.yaml").symlink_to(root / "a.yaml")
    (root / "nest").mkdir()
    (root / "nest" / "again").symlink_to(root)  # a folder loop: never descended

    result = run_cli("validate", "--format", "json", str(root))

    assert result.returncode == 1
    loops = escapes(result)
    assert sorted(d["location"]["file"] for d in loops) == [f"{root}/a.yaml", f"{root}/b.yaml"]
    assert all("loop" in d["summary"] for d in loops)


def test_links_that_stay_inside_the_spec_folder_still_load(tmp_path: Path) -> None:
    root = folder(tmp_path, {"real/data.yaml": dataset("data")})
    (root / "data.yaml").symlink_to(root / "real" / "data.yaml")
    (root / "mirror").symlink_to(root / "real")  # a folder linked from inside: not walked

    result = run_cli("validate", "--format", "json", str(root))

    # The file is found twice (itself and the link to it), the folder link not at all.
    assert result.returncode == 1
    codes = [d["code"] for d in diagnostics(result)]
    assert codes == ["duplicate-name"], result.stdout


# Plan, lock and apply check again (defence in depth) ------------------------------------


def local_provider(spec_root: Path, data_roots: tuple[str, ...] = ()) -> LocalProvider:
    provider = LocalProvider(MachineFacts(cpus=2, memory_bytes=8 * 2**30, gpus=()))
    provider.configure("local", None, ProviderContext(spec_root=spec_root, data_roots=data_roots))
    return provider


def dataset_resource(source: str, **version: str) -> DesiredResource:
    document = {
        "apiVersion": "trainform/v1",
        "kind": "Dataset",
        "metadata": {"name": "corpus"},
        "spec": {
            "source": source,
            "format": "text",
            "versions": [{"name": "v1", **version}],
            "deletionPolicy": "Delete",
        },
    }
    return DesiredResource("Dataset/corpus", "Dataset", "corpus", None, document)


@pytest.mark.parametrize(
    "source", ["../outside", "/etc", "file:///etc", "file://etc", "linked", "a\x00b"]
)
def test_the_local_provider_refuses_to_read_or_delete_outside(tmp_path: Path, source: str) -> None:
    outside = tmp_path / "outside"
    write_tree(outside, {"v1/keep.txt": "precious\n"})
    spec_root = tmp_path / "specs"
    spec_root.mkdir()
    (spec_root / "linked").symlink_to(outside)
    provider = local_provider(spec_root)
    resource = dataset_resource(source)

    with pytest.raises(PermanentProviderError, match="cannot use dataset source") as raised:
        provider.resolve(resource)
    assert repr(source) in str(raised.value)
    with pytest.raises(PermanentProviderError):
        provider.create(resource)
    provider.close()
    assert (outside / "v1" / "keep.txt").read_text(encoding="utf-8") == "precious\n"


def test_the_local_provider_refuses_a_version_folder_linked_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_tree(outside, {"keep.txt": "precious\n"})
    spec_root = tmp_path / "specs"
    (spec_root / "data").mkdir(parents=True)
    (spec_root / "data" / "v1").symlink_to(outside)
    provider = local_provider(spec_root)

    with pytest.raises(PermanentProviderError, match="version v1"):
        provider.resolve(dataset_resource("data"))
    provider.close()


def test_the_local_provider_reads_a_file_uri_under_its_data_roots(tmp_path: Path) -> None:
    data_root = tmp_path / "datasets"
    write_tree(data_root, {"corpus/v1/a.txt": "a\n"})
    provider = local_provider(tmp_path / "specs", (str(data_root),))

    outputs = provider.resolve(dataset_resource(f"file://{data_root}/corpus"))

    assert outputs["versions"]["v1"]["files"] == 1
    provider.close()


@pytest.mark.parametrize("prefix", ["../../elsewhere", "ckpt/../../x", "out"])
def test_a_relative_checkpoint_prefix_stays_under_the_local_root(
    tmp_path: Path, prefix: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    layout = RunLayout(root, "TrainingJob/research/job", "r-1", prefix)

    with pytest.raises(PermanentProviderError, match="cannot place checkpoints"):
        _ = layout.checkpoint_dir


# Properties -------------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _tree() -> tuple[Path, Path]:
    """A spec root and a data root in a temporary folder, with links in and out of both."""
    base = Path(tempfile.mkdtemp(prefix="trainform-paths-"))
    root, data_root = base / "root", base / "dataroot"
    write_tree(base, {"root/inside/v1/a.txt": "a", "outside/v1/s.txt": "s", "dataroot/d/x": "x"})
    links = {
        root / "link_out": base / "outside",
        root / "link_in": root / "inside",
        root / "link_parent": base,
        root / "loop_a": root / "loop_b",
        root / "loop_b": root / "loop_a",
        root / "abs_link": Path("/etc"),
        root / "proc_link": Path("/proc/self"),
        root / "inside" / "back": base,
        data_root / "esc": base / "outside",
        data_root / "d" / "to_root": root,
    }
    for link, target in links.items():
        link.symlink_to(target)
    return root, data_root


ROOT, DATA_ROOT = _tree()
SEGMENTS = st.sampled_from(
    [
        "..", ".", "", "inside", "v1", "a.txt", "link_out", "link_in", "link_parent", "loop_a",
        "abs_link", "proc_link", "back", "esc", "d", "to_root", "dataroot", "outside", "root",
        "-rf", "--upload-pack=touch x", "a\nb", "\x00", "x\x00y", " ", "~", "$HOME", "*",
        "environ", "etc",
    ]
)  # fmt: skip
VERSION_SEGMENTS = st.sampled_from(
    [".", "", "v1", "inside", "link_out", "back", "to_root", "loop_a", "-v", "a\nb", "\x00"]
)
PREFIXES = st.sampled_from(["", "", "/", "file://", "file:///", f"{DATA_ROOT}/"])
REFERENCES = st.builds(
    lambda prefix, parts: prefix + "/".join(parts), PREFIXES, st.lists(SEGMENTS, max_size=8)
)


def _inside(path: str, root: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([real, top]) == top


def _independent_real_path(reference: str, root: Path) -> str:
    text = reference.removeprefix("file://")
    return os.path.realpath(os.path.join(root, text))


@PROPERTY_SETTINGS
@given(reference=REFERENCES, allow_absolute=st.booleans())
def test_confined_path_returns_only_paths_inside(reference: str, allow_absolute: bool) -> None:
    try:
        result = confined_path(ROOT, reference, [str(DATA_ROOT)], allow_absolute=allow_absolute)
    except PathEscape:
        return
    assert "\x00" not in reference
    independent = _independent_real_path(reference, ROOT)
    assert str(result) == independent
    assert _inside(independent, ROOT) or (allow_absolute and _inside(independent, DATA_ROOT))
    assert not independent.startswith(("/proc", "/etc", "/sys"))


def _dataset_resource(source: str, version_path: str) -> Resource:
    model = DOCUMENT_ADAPTER.validate_python(
        {
            "apiVersion": "trainform/v1",
            "kind": "Dataset",
            "metadata": {"name": "corpus"},
            "spec": {
                "source": source,
                "format": "text",
                "versions": [{"name": "v1", "path": version_path}],
            },
        }
    )
    return Resource(model.address, model, Location("data.yaml", 1, 1), 0)


@PROPERTY_SETTINGS
@given(source=REFERENCES, version=st.lists(VERSION_SEGMENTS, max_size=3).map("/".join))
def test_a_source_validate_accepts_is_inside_a_root(source: str, version: str) -> None:
    try:
        resource = _dataset_resource(source, version)
    except ValidationError:
        assume(False)
        return
    config = RootConfig.model_validate(
        {"apiVersion": "trainform/v1", "security": {"dataRoots": [str(DATA_ROOT)]}}
    )

    found = check_data_sources(
        {resource.address: resource}, config, ROOT, lambda r, p: Location("data.yaml", 1, 1)
    )

    if found:
        assert {d.code for d in found} == {"path-escape"}
        return
    assert "\x00" not in source + version
    assert not source.startswith("/") or source.startswith("file://")
    folder = _independent_real_path(source, ROOT)
    allowed = _inside(folder, DATA_ROOT) if source.startswith("file://") else _inside(folder, ROOT)
    assert allowed
    version_folder = os.path.realpath(os.path.join(folder, version or "v1"))
    assert _inside(version_folder, Path(folder))


@PROPERTY_SETTINGS
@given(source=REFERENCES)
def test_the_provider_resolves_sources_only_inside_a_root(source: str) -> None:
    try:
        folder = resolve_source(source, ROOT, (str(DATA_ROOT),))
    except PermanentProviderError as exc:
        assert "cannot use dataset source" in str(exc)
        return
    assert _inside(str(folder), ROOT) or _inside(str(folder), DATA_ROOT)


_PART = st.sampled_from(["a", "ab", "a.b", "b", "ab-c", "..", "."])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PART, max_size=4), st.lists(_PART, max_size=4))
def test_is_within_agrees_with_pathlib_on_absolute_paths(
    inner: list[str], outer: list[str]
) -> None:
    path, root = Path("/", *inner), Path("/", *outer)
    try:
        path.relative_to(root)
        expected = True
    except ValueError:
        expected = False
    assert is_within(path, root) == expected
