"""The environment a job process receives on the local platform, checked before it starts.

Built by the supervisor just before it runs the command. Only a few variables of the
supervisor's own environment are passed on (PATH, HOME, LANG, LC_ALL, TMPDIR, USER), then
PYTHONHASHSEED=0 and PYTHONUNBUFFERED=1 for reproducible, promptly logged Python, the
GPUs admission assigned (CUDA_VISIBLE_DEVICES, empty for CPU-only attempts), every
TRAINFORM_* variable documented in providers/jobs.py, and the launch's own `env` last.

`LaunchRefused` stops an attempt before its command runs: a pinned dataset version whose
content no longer matches its manifest digest (data mutated), a dataset folder that is
gone or leaves the spec folder and the data roots, or a resume checkpoint that is no
longer valid.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainform.providers.errors import ProviderError
from trainform.providers.local.checkpoints import check_checkpoint
from trainform.providers.local.datasets import build_manifest, resolve_source, version_folder
from trainform.providers.local.runs import Attempt
from trainform.providers.run_events import events_path

INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")


class LaunchRefused(Exception):
    """The attempt must not run; the message is the attempt's reason."""


def variable_suffix(name: str) -> str:
    """`tiny-corpus` -> `TINY_CORPUS`, as in TRAINFORM_DATASET_TINY_CORPUS."""
    return name.upper().replace("-", "_").replace(".", "_")


def parameter_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def version_path(dataset: dict[str, Any]) -> str:
    spec = dataset["document"]["spec"]
    version = next(
        (v for v in spec.get("versions", []) if v.get("name") == dataset["version"]), None
    )
    return str((version or {}).get("path") or dataset["version"])


def dataset_location(dataset: dict[str, Any]) -> str:
    """`s3://bucket/prefix/<version>` of a DatasetInput kept on S3, else ""."""
    source = str(dataset["document"]["spec"]["source"])
    if not source.startswith("s3://"):
        return ""
    return f"{source.rstrip('/')}/{version_path(dataset).strip('/')}"


def dataset_folder(
    dataset: dict[str, Any], spec_root: Path, data_roots: Sequence[str] = ()
) -> Path:
    """The folder of one DatasetInput (as JSON) on this machine, confined to the spec
    folder or a data root (PermanentProviderError if it leaves them)."""
    source = resolve_source(dataset["document"]["spec"]["source"], spec_root, data_roots)
    return version_folder(source, {"name": dataset["version"], "path": version_path(dataset)})


def _staged(attempt: Attempt, dataset: dict[str, Any], location: str) -> Path:
    """A dataset version on S3, copied into the local cache and verified against its pin."""
    from trainform.providers.objectstore.client import make_client
    from trainform.providers.objectstore.staging import stage_version

    label = f"dataset {dataset['name']}@{dataset['version']}"
    try:
        client = make_client(attempt.launch.get("object_store"))
        cache = Path(attempt.launch.get("dataset_cache") or Path(attempt.workdir) / "datasets")
        return stage_version(client, location, dataset.get("manifest_digest") or "", cache)
    except ProviderError as exc:
        raise LaunchRefused(f"{label}: {exc}") from None


def verified_datasets(attempt: Attempt) -> dict[str, str]:
    """TRAINFORM_DATASET_* for the attempt, after checking each pinned manifest digest."""
    variables = {}
    for dataset in attempt.launch.get("datasets", []):
        label = f"dataset {dataset['name']}@{dataset['version']}"
        suffix = variable_suffix(dataset["name"])
        location = dataset_location(dataset)
        if location:
            variables[f"TRAINFORM_DATASET_{suffix}"] = str(_staged(attempt, dataset, location))
            variables[f"TRAINFORM_DATASET_{suffix}_URI"] = location
            continue
        try:
            folder = dataset_folder(
                dataset, Path(attempt.spec_root), attempt.launch.get("data_roots", ())
            )
        except ProviderError as exc:
            raise LaunchRefused(f"{label}: {exc}") from None
        if not folder.is_dir():
            raise LaunchRefused(f"{label}: folder {folder} does not exist")
        pinned = dataset.get("manifest_digest") or ""
        if pinned:
            found = build_manifest(folder).digest
            if found != pinned:
                raise LaunchRefused(
                    f"{label} changed since it was pinned (data mutated): "
                    f"pinned {pinned}, found {found}"
                )
        variables[f"TRAINFORM_DATASET_{suffix}"] = str(folder)
    return variables


def resume_variables(attempt: Attempt) -> dict[str, str]:
    if not attempt.resume_from:
        return {"TRAINFORM_RESUME_FROM": "", "TRAINFORM_RESUME_STEP": "0"}
    folder = Path(attempt.checkpoint_dir) / attempt.resume_from
    if not folder.is_dir():
        raise LaunchRefused(f"checkpoint {attempt.resume_from} to resume from does not exist")
    status = check_checkpoint(folder)
    if not status.valid:
        raise LaunchRefused(f"checkpoint {attempt.resume_from} is not valid: {status.problem}")
    return {"TRAINFORM_RESUME_FROM": str(folder), "TRAINFORM_RESUME_STEP": str(status.step)}


def job_environment(attempt: Attempt) -> dict[str, str]:
    """The full environment of the attempt's command; raises LaunchRefused."""
    launch = attempt.launch
    environment = {name: os.environ[name] for name in INHERITED if name in os.environ}
    environment.update(
        PYTHONHASHSEED="0",
        PYTHONUNBUFFERED="1",
        CUDA_VISIBLE_DEVICES=attempt.devices,
        TRAINFORM_JOB=attempt.address,
        TRAINFORM_RUN_ID=attempt.run_id,
        TRAINFORM_ATTEMPT=str(attempt.attempt),
        TRAINFORM_CHECKPOINT_DIR=attempt.checkpoint_dir,
        TRAINFORM_OUTPUT_DIR=attempt.output_dir,
        TRAINFORM_PROGRESS_FILE=str(Path(attempt.workdir) / "progress.json"),
        TRAINFORM_EVENTS_FILE=str(events_path(attempt.log_path)),
    )
    if launch.get("checkpoint_interval") is not None:
        environment["TRAINFORM_CHECKPOINT_INTERVAL"] = str(launch["checkpoint_interval"])
    if launch.get("keep_last") is not None:
        environment["TRAINFORM_KEEP_LAST"] = str(launch["keep_last"])
    if attempt.kind == "eval":
        environment.update(
            TRAINFORM_MODEL_DIR=attempt.model_dir,
            TRAINFORM_METRICS_FILE=attempt.metrics_file,
            TRAINFORM_EVAL_SUITE=attempt.suite or "",
        )
    parameters = launch.get("parameters", {})
    for name, value in parameters.items():
        environment[f"TRAINFORM_PARAM_{variable_suffix(name)}"] = parameter_text(value)
    environment["TRAINFORM_PARAMETERS"] = json.dumps(parameters, sort_keys=True)
    environment.update(verified_datasets(attempt))
    environment.update(resume_variables(attempt))
    environment.update({str(k): str(v) for k, v in launch.get("env", {}).items()})
    return environment
