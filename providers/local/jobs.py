"""The job side of the local provider: submit, cancel and read runs (JobProvider).

`LocalJobs` turns a JobLaunch into a queued attempt row (providers/local/runs.py), lays
out its folders (providers/local/layout.py), snapshots its code and lets admission start
it. Called by LocalProvider in the trainform process; nothing here blocks on a job.

Invariants: submitting the same attempt again changes nothing (the attempt id derives
from the job address, run id, kind, suite and attempt number); every dataset input is
pinned to a manifest digest before the attempt is recorded (the launch's own pin, else
the digest the platform recorded for that version, else the content at submission), so
the supervisor can refuse mutated data; a run's checkpoint folder is fixed by its first
attempt (a later in-place change of the prefix does not strand its checkpoints);
cancelling keeps checkpoints.
"""

from __future__ import annotations

import signal
from dataclasses import asdict, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from providers.errors import PermanentProviderError
from providers.jobs import DatasetInput, JobLaunch, RunStatus
from providers.local.admission import admit
from providers.local.checkpoints import STEP_FOLDER
from providers.local.datasets import build_manifest
from providers.local.environment import dataset_folder, dataset_location
from providers.local.layout import RunLayout, snapshot_code, suite_name
from providers.local.processes import signal_process, supervisor_alive
from providers.local.runs import Attempt, RunStore, utc_now
from providers.local.status import run_statuses


def attempt_id_of(launch: JobLaunch) -> str:
    """`<address>:<run>.<n>` for training, `<address>:<run>.eval.<suite>.<n>` for evaluations."""
    run = f"{launch.address}:{launch.run_id}"
    if launch.kind == "eval":
        return f"{run}.eval.{suite_name(launch.suite or '')}.{launch.attempt}"
    return f"{run}.{launch.attempt}"


class LocalJobs:
    def __init__(
        self,
        store: RunStore,
        root: Path,
        spec_root: Path,
        manager: str,
        object_store: dict[str, Any] | None = None,
        data_roots: tuple[str, ...] = (),
    ) -> None:
        self.store = store
        self.root = root
        self.spec_root = spec_root
        self.manager = manager
        self.object_store = object_store
        self.data_roots = data_roots
        self._lifecycle_done: set[str] = set()

    # JobProvider -----------------------------------------------------------------------

    def submit(self, launch: JobLaunch) -> dict[str, Any]:
        if launch.kind not in ("train", "eval"):
            raise PermanentProviderError(f"unknown launch kind {launch.kind!r}")
        if launch.kind == "eval" and not launch.suite:
            raise PermanentProviderError("an evaluation launch names no suite")
        if launch.nodes != 1:
            raise PermanentProviderError(
                f"the local provider runs single-node jobs; this one asks for {launch.nodes}"
            )
        for name, amount in (("cpu", launch.cpu), ("memory", launch.memory)):
            try:
                valid = Decimal(amount).is_finite() and Decimal(amount) >= 0
            except (InvalidOperation, TypeError):
                valid = False
            if not valid:
                raise PermanentProviderError(
                    f"{name} {amount!r} is not an exact non-negative decimal amount"
                )
        attempt_id = attempt_id_of(launch)
        if self.store.get(attempt_id) is None:
            self.store.insert(self._attempt(launch, attempt_id))
        admit(self.store)
        return {"runId": launch.run_id, "attempt": launch.attempt}

    def cancel(self, address: str, run_id: str | None = None) -> None:
        """Stop unfinished attempts of one run (every run when `run_id` is None)."""
        for attempt in self.store.by_address(address, self.manager):
            if attempt.finished or (run_id is not None and attempt.run_id != run_id):
                continue
            with self.store.transaction():
                current = self.store.get(attempt.id)
                if current is None or current.finished:
                    continue
                if current.phase == "queued":
                    self.store.update(
                        current.id, phase="cancelled", reason="cancelled", ended_at=utc_now()
                    )
                    continue
                self.store.update(current.id, cancel_requested=1)
            if supervisor_alive(current.supervisor_pid, current.id):
                signal_process(current.supervisor_pid or 0, signal.SIGTERM)
        admit(self.store)

    def runs(self, address: str) -> list[RunStatus]:
        return run_statuses(self.store, self.store.by_address(address, self.manager))

    def tick(self) -> list[str]:
        return admit(self.store)

    # recording an attempt ----------------------------------------------------------------

    def _attempt(self, launch: JobLaunch, attempt_id: str) -> Attempt:
        layout = RunLayout(self.root, launch.address, launch.run_id, launch.checkpoint_prefix)
        training = self._training_attempts(launch.address, launch.run_id)
        checkpoint_dir = training[-1].checkpoint_dir if training else str(layout.checkpoint_dir)
        stored = (
            training[-1].launch.get("checkpoint_store")
            if training
            else self._checkpoint_store(layout)
        )
        if launch.kind == "eval":
            workdir = layout.evaluation_dir(launch.suite or "")
            log = workdir / f"attempt-{launch.attempt}.log"
            output_dir, metrics_file = workdir, str(workdir / "metrics.json")
            model_dir = str(self._model_dir(launch))
        else:
            workdir, log, output_dir = layout.run_dir, layout.log(launch.attempt), layout.output_dir
            metrics_file, model_dir = "", ""
        self._snapshot(launch, workdir)
        pinned = [self._pinned(dataset) for dataset in launch.datasets]
        return Attempt(
            id=attempt_id,
            address=launch.address,
            run_id=launch.run_id,
            attempt=launch.attempt,
            kind=launch.kind,
            suite=launch.suite,
            project=launch.project,
            queue=launch.queue,
            priority=launch.priority,
            cpu=launch.cpu,
            memory=launch.memory,
            gpus=launch.gpus,
            phase="queued",
            launch=replace(launch, datasets=pinned).to_json()
            | ({"checkpoint_store": stored} if stored else {})
            | ({"data_roots": list(self.data_roots)} if self.data_roots else {})
            | self._object_store_settings(pinned),
            workdir=str(workdir),
            checkpoint_dir=checkpoint_dir,
            output_dir=str(output_dir),
            log_path=str(log),
            metrics_file=metrics_file,
            resume_from=launch.resume_from,
            submitted_at=utc_now(),
            manager=self.manager,
            spec_root=str(self.spec_root),
            model_dir=model_dir,
        )

    def _object_store_settings(self, datasets: list[DatasetInput]) -> dict[str, Any]:
        """What the supervisor needs to read datasets kept on S3 (no secrets)."""
        if not any(dataset_location(asdict(d)) for d in datasets):
            return {}
        return {
            "object_store": self.object_store,
            "dataset_cache": str(self.root / "cache" / "datasets"),
        }

    def _checkpoint_store(self, layout: RunLayout) -> dict[str, Any] | None:
        """Where the supervisor publishes checkpoints kept on S3 (no secrets: boto3 reads
        credentials from the supervisor's environment)."""
        if not layout.checkpoint_uri:
            return None
        if self.object_store is None:
            raise PermanentProviderError(
                f"checkpoints go to {layout.checkpoint_prefix}, but trainform.yaml declares no "
                "objectstore provider instance to reach it"
            )
        prefix = layout.checkpoint_prefix.rstrip("/")
        if prefix not in self._lifecycle_done:
            from providers.objectstore.checkpoints import ensure_lifecycle
            from providers.objectstore.client import make_client

            ensure_lifecycle(make_client(self.object_store), prefix)
            self._lifecycle_done.add(prefix)
        return {"uri": layout.checkpoint_uri, "connection": self.object_store}

    def _s3_digest(self, dataset: DatasetInput, location: str) -> str:
        from providers.objectstore.client import make_client
        from providers.objectstore.staging import version_manifest

        if self.object_store is None:
            raise PermanentProviderError(
                f"dataset {dataset.name}@{dataset.version} is on {location}, but trainform.yaml "
                "declares no objectstore provider instance to reach it"
            )
        manifest = version_manifest(make_client(self.object_store), location)
        if not manifest.objects:
            raise PermanentProviderError(
                f"dataset {dataset.name}@{dataset.version}: no objects under {location}/"
            )
        return manifest.digest

    def _training_attempts(self, address: str, run_id: str) -> list[Attempt]:
        return [
            a for a in self.store.by_address(address) if a.run_id == run_id and a.kind == "train"
        ]

    def _model_dir(self, launch: JobLaunch) -> Path:
        """What an evaluation reads: a run's output folder, or `[<run>/]step-<N>`."""
        target = launch.model_run or launch.run_id
        run_id, _, checkpoint = target.rpartition("/")
        if STEP_FOLDER.match(checkpoint):
            run_id = run_id or launch.run_id
            training = self._training_attempts(launch.address, run_id)
            layout = RunLayout(self.root, launch.address, run_id)
            base = training[-1].checkpoint_dir if training else str(layout.checkpoint_dir)
            return Path(base) / checkpoint
        training = self._training_attempts(launch.address, target)
        if training:
            return Path(training[-1].output_dir)
        return RunLayout(self.root, launch.address, target).output_dir

    def _snapshot(self, launch: JobLaunch, workdir: Path) -> None:
        code = workdir / "code"
        if launch.code_dir is None:
            code.mkdir(parents=True, exist_ok=True)
            return
        try:
            snapshot_code(Path(launch.code_dir), code, exclude=(self.root,))
        except FileNotFoundError as exc:
            raise PermanentProviderError(str(exc)) from None

    def _pinned(self, dataset: DatasetInput) -> DatasetInput:
        if dataset.manifest_digest:
            return dataset
        outputs = self.store.platform_outputs(dataset.address) or {}
        recorded = (outputs.get("versions", {}).get(dataset.version) or {}).get("manifestDigest")
        if recorded:
            return replace(dataset, manifest_digest=recorded)
        location = dataset_location(asdict(dataset))
        if location:
            return replace(dataset, manifest_digest=self._s3_digest(dataset, location))
        folder = dataset_folder(asdict(dataset), self.spec_root, self.data_roots)
        if not folder.is_dir():
            raise PermanentProviderError(
                f"dataset {dataset.name}@{dataset.version}: folder {folder} does not exist"
            )
        return replace(dataset, manifest_digest=build_manifest(folder).digest)
