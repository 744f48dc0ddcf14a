"""Properties of loading: only SpecError escapes, and the same input gives the same output."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainform.cli import cli
from trainform.specs import SpecError, SpecLoadError, load_specs
from trainform.specs.names import SLURM_RESERVED

from tests.helpers import CONFIG

PROPERTY_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# Whole generated platforms cost more per example.
PLATFORM_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=100)


@contextlib.contextmanager
def spec_folder(files: dict[str, str | bytes]) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="trainform-property-"))
    try:
        for name, content in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        yield root
    finally:
        shutil.rmtree(root)


def load_outcome(root: Path) -> Any:
    """What a load produced, in a comparable form: addresses or diagnostics."""
    try:
        loaded = load_specs(root)
    except SpecLoadError as exc:
        return ("error", [d.as_dict() for d in exc.diagnostics])
    return (
        "ok",
        [
            (address, resource.document, str(resource.location), resource.dependencies)
            for address, resource in loaded.resources.items()
        ],
        loaded.files,
    )


# Arbitrary input never escapes as anything but SpecError.

YAML_TOKENS = st.sampled_from(
    [
        "apiVersion: trainform/v1\n", "kind: Queue\n", "kind: Project\n", "metadata:\n",
        "  name: x\n", "  project: p\n", "spec:\n", "  pools:\n", "    - pool: a\n",
        "      nominalQuota: {cpu: 1}\n", "---\n", "...\n", "- ", ": ", "? ", "&a ", "*a ",
        "!!str ", "!tag ", "{", "}", "[", "]", ",", "'", '"', "|\n", ">\n", "#", "  ", "\t",
        "\n", "{{ x }}", "{% if %}", "0777", "1.10", "no", "on", "~", "null", "1e400",
        ".nan", "-", "%YAML 1.2\n", "\ufeff", "\x00", "é",
    ]
)  # fmt: skip

yaml_like = st.lists(YAML_TOKENS, max_size=40).map("".join)
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=400)


@PROPERTY_SETTINGS
@given(text=st.one_of(yaml_like, any_text))
def test_any_text_loads_or_raises_spec_error(text: str) -> None:
    with spec_folder({"trainform.yaml": CONFIG, "specs.yaml": text}) as root:
        try:
            load_specs(root)
        except SpecError:
            pass


@PROPERTY_SETTINGS
@given(data=st.binary(max_size=300))
def test_any_bytes_load_or_raise_spec_error(data: bytes) -> None:
    with spec_folder({"specs.yaml": data}) as root:
        try:
            load_specs(root)
        except SpecError:
            pass


@PROPERTY_SETTINGS
@given(text=st.one_of(yaml_like, any_text))
def test_any_root_config_loads_or_raises_spec_error(text: str) -> None:
    with spec_folder({"trainform.yaml": text}) as root:
        try:
            load_specs(root)
        except SpecError:
            pass


# Generated valid platforms load deterministically.

names = st.from_regex(r"[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,4})?", fullmatch=True)


@st.composite
def quantities(draw: st.DrawFn) -> str | int:
    number = draw(st.integers(min_value=0, max_value=4096))
    suffix = draw(st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3"]))
    if not suffix and draw(st.booleans()):
        return number
    return f"{number}{suffix}"


def document(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "trainform/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


@st.composite
def platforms(draw: st.DrawFn, valid: bool = True) -> dict[str, str]:
    """Files of a platform: projects, pools and queues on them, split over a few files.

    With `valid=False` some references may name pools that do not exist.
    """
    allowed = names.filter(lambda n: n not in SLURM_RESERVED)
    projects = draw(st.lists(allowed, max_size=4, unique=True))
    pools = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    queues = draw(st.lists(allowed, max_size=5, unique=True))
    documents = [
        document("Project", name, {"owners": [f"{name}@example.com"]}) for name in projects
    ]
    for name in pools:
        spec = {
            "provider": "local",
            "nodes": draw(st.integers(1, 64)),
            "cpu": draw(quantities()),
            "memory": draw(quantities()),
        }
        documents.append(document("ResourcePool", name, spec))
    for name in queues:
        targets = draw(st.lists(st.sampled_from(pools), min_size=1, max_size=2, unique=True))
        if not valid and draw(st.booleans()):
            targets.append(draw(names.filter(lambda n: n not in pools)))
        quota_pools = [
            {"pool": pool, "nominalQuota": {"cpu": draw(quantities()), "gpu": draw(quantities())}}
            for pool in targets
        ]
        documents.append(document("Queue", name, {"pools": quota_pools}))
    order = draw(st.permutations(range(len(documents))))
    file_count = draw(st.integers(1, 3))
    files: dict[str, list[str]] = {}
    for position, index in enumerate(order):
        name = f"dir{position % file_count}/specs-{position % file_count}.yaml"
        files.setdefault(name, []).append(json.dumps(documents[index]))
    return {"trainform.yaml": CONFIG} | {
        name: "\n---\n".join(texts) + "\n" for name, texts in files.items()
    }


@PLATFORM_SETTINGS
@given(files=platforms())
def test_generated_valid_platform_loads_every_resource(files: dict[str, str]) -> None:
    with spec_folder(files) as root:
        loaded = load_specs(root)
    declared = sum(text.count('"kind"') for text in files.values())
    assert len(loaded.resources) == declared
    for resource in loaded.resources.values():
        if resource.kind == "ResourcePool":
            assert isinstance(resource.document.spec.memory.value, Decimal)


def normalized_outcome(root: Path) -> str:
    return json.dumps(load_outcome(root), default=str).replace(str(root), "ROOT")


@PLATFORM_SETTINGS
@given(files=platforms(valid=False), reverse=st.booleans())
def test_loads_give_identical_addresses_order_and_diagnostics(
    files: dict[str, str], reverse: bool
) -> None:
    """Twice the same folder, and a copy written in another file order: one outcome."""
    reordered = dict(reversed(list(files.items()))) if reverse else dict(sorted(files.items()))
    with spec_folder(files) as first, spec_folder(reordered) as second:
        assert load_outcome(first) == load_outcome(first)
        assert normalized_outcome(first) == normalized_outcome(second)


@PLATFORM_SETTINGS
@given(files=platforms(valid=False))
def test_validate_json_is_byte_identical_across_runs(files: dict[str, str]) -> None:
    runner = CliRunner(env={"NO_COLOR": "1"})
    with spec_folder(files) as root, contextlib.chdir(root):
        outputs = [runner.invoke(cli, ["validate", ".", "--format", "json"]) for _ in range(2)]
    assert outputs[0].exit_code == outputs[1].exit_code
    assert outputs[0].exit_code in (0, 1)
    assert outputs[0].stdout_bytes == outputs[1].stdout_bytes
    json.loads(outputs[0].stdout)
