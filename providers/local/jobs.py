"""The job side of the local provider: submit, cancel and read runs, read attempt logs
and account for usage (JobProvider).

`LocalJobs` turns a JobLaunch into a queued attempt row (providers/local/runs.py), lays
out its folders (providers/local/layout.py), snapshots its code and lets admission start
it. Called by LocalProvider in the trainform process; nothing here blocks on a job.

Invariants: submitting the same attempt again changes nothing (the attempt id derives
from the job address, run id, kind, suite and attempt number); every dataset input is
pinned to a manifest digest before the attempt is recorded (the launch's own pin, else
the digest the platform recorded for that version, else the content at submission), so
the supervisor can refuse mutated data; a run's checkpoint folder is fixed by its first
attempt (a later in-place change of the prefix does not strand its checkpoints);
cancelling keeps checkpoints and logs (nothing here deletes either: logs live under the
run's folder beside its checkpoints and outlive the job, its cancellation and its
replacement by a new run).
"""

from __future__ import annotations

import signal
from dataclasses import asdict, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.jobs import (
    AccountedRun,
    DatasetInput,
    JobLaunch,
    LogChunk,
    RunStatus,
    parse_utc,
    utc_text,
)
from trainform.providers.local.admission import admit, cancel_queued
from trainform.providers.local.checkpoints import STEP_FOLDER, CheckCache
from trainform.providers.local.datasets import build_manifest
from trainform.providers.local.environment import dataset_folder, dataset_location
from trainform.providers.local.layout import LOCK_FILE_NAME, RunLayout, snapshot_code, suite_name
from trainform.providers.local.processes import signal_process, supervisor_alive
from trainform.providers.local.runs import Attempt, RunStore, attempt_id, utc_now
from trainform.providers.local.status import run_statuses

LOG_CHUNK_BYTES = 4 * 2**20


def attempt_id_of(launch: JobLaunch) -> str:
    """`<address>:<run>.<n>` for training, `<address>:<run>.eval.<suite>.<n>` for evaluations."""
    suite = suite_name(launch.suite or "") if launch.kind == "eval" else None
    return attempt_id(launch.address, launch.run_id, launch.attempt, suite)


def _decoded(data: bytes, final: bool) -> tuple[str, int]:
    """`data` as text and how many bytes of it that text covers: a UTF-8 sequence cut at
    the end is left for the next read unless the log is `final`."""
    if not final:
        for trim in range(4):
            try:
                return data[: len(data) - trim].decode("utf-8"), len(data) - trim
            except UnicodeDecodeError as exc:
                if exc.reason != "unexpected end of data":
                    break
    return data.decode("utf-8", errors="replace"), len(data)


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
        if launch.nodes < 1:
            raise PermanentProviderError(f"a launch needs at least one node, not {launch.nodes}")
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
        """Stop unfinished attempts of one run (every run when `run_id` is None), including
        a retry a supervisor schedules meanwhile (the passes repeat until none is new)."""
        handled: set[str] = set()
        while True:
            pending = [
                attempt
                for attempt in self.store.by_address(address, self.manager)
                if not attempt.finished and attempt.id not in handled
                if run_id is None or attempt.run_id == run_id
            ]
            if not pending:
                break
            for attempt in pending:
                handled.add(attempt.id)
                self._cancel_one(attempt.id)
        admit(self.store)

    def _cancel_one(self, ident: str) -> None:
        with self.store.transaction():
            current = self.store.get(ident)
            if current is None or current.finished:
                return
            if current.phase == "queued":
                cancel_queued(self.store, current)
                return
            self.store.update(current.id, cancel_requested=1)
        if supervisor_alive(current.supervisor_pid, current.id):
            signal_process(current.supervisor_pid or 0, signal.SIGTERM)

    def runs(self, address: str) -> list[RunStatus]:
        return run_statuses(self.store, self.store.by_address(address, self.manager))

    def runs_of(self, addresses: list[str]) -> dict[str, list[RunStatus]]:
        """`runs` of many jobs, read in a few queries."""
        found = self.store.by_addresses(addresses, self.manager, light=True)
        cache = CheckCache(self.store)
        runs = {
            address: run_statuses(self.store, found[address], cache=cache) for address in addresses
        }
        cache.flush()
        return runs

    def tick(self) -> list[str]:
        return admit(self.store)

    def interrupt(self, address: str, run_id: str) -> str:
        """A drill's fault: SIGKILL the running training attempt's job process (as a crash
        would); its supervisor records the failure and retries as the job declares."""
        running = [
            a
            for a in self.store.by_address(address, self.manager)
            if a.run_id == run_id and a.kind == "train" and a.phase == "running"
        ]
        if not running or not running[-1].child_pid:
            raise PermanentProviderError(
                f"cannot interrupt run {run_id} of {address}: no training process of it runs"
            )
        attempt = running[-1]
        if not signal_process(attempt.child_pid or 0, signal.SIGKILL):
            raise PermanentProviderError(
                f"cannot interrupt attempt {attempt.attempt} of {address}: process "
                f"{attempt.child_pid} is gone"
            )
        what = "the training process" if attempt.nodes == 1 else "node 0's launcher"
        return (
            f"killed {what} (pid {attempt.child_pid}) of attempt {attempt.attempt} with SIGKILL"
        )

    def read_log(
        self, address: str, run_id: str, attempt: int, offset: int = 0, suite: str | None = None
    ) -> LogChunk:
        """Up to LOG_CHUNK_BYTES of the attempt's log file from byte `offset`."""
        ident = attempt_id(address, run_id, attempt, suite_name(suite) if suite else None)
        row = self.store.get(ident)
        what = f"attempt {attempt} of run {run_id} of {address}" + (
            f" (evaluation {suite})" if suite else ""
        )
        if row is None or row.manager != self.manager:
            raise PermanentProviderError(
                f"cannot read the log of {what}: the local platform has no such attempt; "
                f"`trainform status {address}` lists its attempts"
            )
        path = Path(row.log_path)
        # Read the phase before the file: a finished attempt's log is complete.
        finished = row.finished
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, offset))
                data = handle.read(LOG_CHUNK_BYTES)
                at_end = not handle.read(1)
        except FileNotFoundError:
            if row.admitted_at or row.started_at:
                raise PermanentProviderError(
                    f"cannot read the log of {what}: {path} is gone (deleted by hand?)"
                ) from None
            return LogChunk("", offset, finished, str(path))  # never started: no log yet
        except OSError as exc:
            raise PermanentProviderError(
                f"cannot read the log of {what}: {path}: {exc.strerror or exc}"
            ) from None
        text, used = _decoded(data, finished and at_end)
        return LogChunk(text, max(0, offset) + used, finished and at_end, str(path))

    def accounting(self, since: str) -> list[AccountedRun]:
        """Runs of this manager with an attempt ended at or after `since` or unfinished
        (one query; checkpoints listed once per run, sizes checked but not hashed)."""
        moment = parse_utc(since)
        if moment is None:
            raise PermanentProviderError(
                f"cannot account for runs since {since!r}: not an ISO-8601 time"
            )
        attempts = self.store.accounted(self.manager, utc_text(moment))
        by_job: dict[str, list[Attempt]] = {}
        for attempt in attempts:
            by_job.setdefault(attempt.address, []).append(attempt)
        pools = {
            address.split("/", 1)[1]: ",".join(p["pool"] for p in document["spec"]["pools"])
            for address, _, document in self.store.platform_objects("Queue")
        }
        accounted = []
        for address, group in by_job.items():
            first = {a.run_id: a for a in reversed(group) if a.kind == "train"}
            for run in run_statuses(self.store, group, hashed=False):
                origin = first.get(run.run_id) or next(a for a in group if a.run_id == run.run_id)
                accounted.append(
                    AccountedRun(
                        address, origin.project, origin.queue, run, pools.get(origin.queue, "")
                    )
                )
        return accounted

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
            eligible_at=launch.eligible_at,
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
            from trainform.providers.objectstore.checkpoints import ensure_lifecycle
            from trainform.providers.objectstore.client import make_client

            ensure_lifecycle(make_client(self.object_store), prefix)
            self._lifecycle_done.add(prefix)
        return {"uri": layout.checkpoint_uri, "connection": self.object_store}

    def _s3_digest(self, dataset: DatasetInput, location: str) -> str:
        from trainform.providers.objectstore.client import make_client
        from trainform.providers.objectstore.staging import version_manifest

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
            snapshot_code(
                Path(launch.code_dir), code, exclude=(self.root, self.spec_root / LOCK_FILE_NAME)
            )
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
