"""The job side of the Slurm provider: sbatch, scancel, and runs from squeue/sacct.

Each attempt gets a folder under the connection's `job_root` (never in the spec folder):

    <job_root>/runs/<project>/<job>/<run_id>/
        code/ output/ progress.json            as on the local provider
        attempts/<n>/ job.sh launch.json claim submission.json slurm.log
                      starts.json result.json       (the runner writes the last two)
                      slurm.events.jsonl            (the job's run events, if it writes any)
        evaluations/<suite>/attempts/<n>/ ...  metrics.json
    <job_root>/checkpoints/<project>/<job>/<run_id>/step-<N>/

`job.sh` is generated (every value shlex-quoted, providers/slurm/attempts.py) and `exec`s
the runner module (providers/slurm/runner.py), which starts the job's command argv with
the trainform environment, forwards the checkpoint signal, and submits the next attempt
itself after its retry backoff when the command fails with retries left. sbatch gets the
partition, QOS and account, GRES, nodes, time limit, `--requeue`,
`--signal=B:USR1@<seconds>` and the ownership comment
`trainform:<manager>:<address>:<run>:<kind>:<suite>:<attempt>`. Submitting the same
attempt again changes nothing (submission.json records the job id; `claim` makes one of
two concurrent submitters win).

Reading runs costs one squeue and at most one sacct (for jobs squeue no longer shows, and
for started or requeued ones, whose kept wait reason and earlier runs only sacct has);
the timeline of each attempt is assembled by providers/slurm/timeline.py. `read_log`
reads the attempt's output file by byte offset; `accounting` is one sacct over a period.
"""

from __future__ import annotations

import json
import os
import pwd
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

from trainform.providers.errors import PermanentProviderError, TransientProviderError
from trainform.providers.jobs import (
    AccountedRun,
    EvaluationStatus,
    JobLaunch,
    LogChunk,
    RunPhase,
    RunStatus,
)
from trainform.providers.launch import processes_per_node
from trainform.providers.local.checkpoints import STEP_FOLDER, latest_valid, list_checkpoints
from trainform.providers.local.environment import dataset_folder, parameter_text, variable_suffix
from trainform.providers.local.layout import RunLayout, job_parts, snapshot_code, suite_name
from trainform.providers.run_events import events_path
from trainform.providers.slurm import attempts, history
from trainform.providers.slurm.attempts import Submission
from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.distributed import distributed_of
from trainform.providers.slurm.names import (
    check_identifier,
    check_job_id,
    marker,
    mebibytes,
    parse_marker,
    slurm_minutes,
)
from trainform.providers.slurm.runner import now
from trainform.providers.slurm.status import SlurmJobState, parse_jobs, phase_of
from trainform.providers.slurm.timeline import attempt_status

SIGNAL_LIMIT = 65535


def comment_of(manager: str, launch: JobLaunch) -> str:
    suite = suite_name(launch.suite) if launch.suite else ""
    tail = f"{launch.run_id}:{launch.kind}:{suite}:{launch.attempt}"
    return f"{marker(manager, launch.address)}:{tail}"


def parse_comment(comment: str) -> tuple[str, str] | None:
    """(manager, job address) of a trainform job comment."""
    found = parse_marker(comment)
    if found is None:
        return None
    manager, rest = found
    parts = rest.split(":")
    return (manager, parts[0]) if len(parts) >= 5 else None


def signal_seconds(launch: JobLaunch) -> int | None:
    """How long before the time limit the job gets USR1: one checkpoint interval."""
    if not launch.max_runtime or not launch.checkpoint_interval:
        return None
    return max(10, min(launch.checkpoint_interval, launch.max_runtime // 2, SIGNAL_LIMIT))


class SlurmJobs:
    def __init__(
        self,
        commands: SlurmCommands,
        root: Path,
        spec_root: Path,
        manager: str,
        gres: str = "gpu",
        data_roots: tuple[str, ...] = (),
        containers: str = "pyxis",
        qos_of: Callable[[str], str] | None = None,
    ) -> None:
        self.containers = containers
        # the QOS jobs of a queue ask for: the partition's QOS (an adopted partition may
        # name another QOS than the queue's name)
        self.qos_of = qos_of or (lambda queue: queue)
        self.commands = commands
        self.data_roots = data_roots
        self.root = root
        self.spec_root = spec_root
        self.manager = manager
        self.gres = gres

    # folders -----------------------------------------------------------------------------

    def _layout(self, address: str, run_id: str, prefix: str = "") -> RunLayout:
        if prefix.startswith("s3://"):
            raise PermanentProviderError(
                "the slurm provider keeps checkpoints under its job_root; an s3:// checkpoint "
                "prefix is not supported"
            )
        return RunLayout(self.root, address, run_id, prefix)

    def attempt_dir(self, launch: JobLaunch) -> Path:
        layout = self._layout(launch.address, launch.run_id, launch.checkpoint_prefix)
        base = (
            layout.evaluation_dir(launch.suite or "") if launch.kind == "eval" else layout.run_dir
        )
        return base / "attempts" / str(launch.attempt)

    def _attempt_dirs(self, address: str) -> list[Path]:
        project, job = job_parts(address)
        base = self.root / "runs" / project / job
        return sorted(base.glob("*/attempts/*")) + sorted(base.glob("*/evaluations/*/attempts/*"))

    # JobProvider -------------------------------------------------------------------------

    def submit(self, launch: JobLaunch) -> dict[str, Any]:
        if launch.kind not in ("train", "eval") or (launch.kind == "eval" and not launch.suite):
            raise PermanentProviderError(f"cannot submit a {launch.kind!r} launch")
        if not launch.project:
            raise PermanentProviderError("cannot submit a job without a project (Slurm account)")
        outputs = {"runId": launch.run_id, "attempt": launch.attempt}
        folder = self.attempt_dir(launch)
        if (folder / attempts.SUBMISSION).exists():
            return outputs
        comment = comment_of(self.manager, launch)
        existing = [j for j in self._queue_states() if j.comment == comment]
        folder.mkdir(parents=True, exist_ok=True)
        if existing:  # submitted before the record was written
            record = {"job_id": existing[0].job_id, "submitted_at": now(), "comment": comment}
            attempts.record_submission(folder, {**record, "by": "provider"})
            return outputs
        if not attempts.claim(folder):
            raise TransientProviderError(
                f"cannot submit attempt {launch.attempt} of run {launch.run_id}: another "
                "submission of it is under way (the runner's retry, or another apply); it is "
                "read again in a moment",
                retry_after=2.0,
            )
        try:
            self._require_association(launch)
            launch_file = self._write_launch(launch, folder, comment)
            argv = self._sbatch(launch, folder, comment, launch_file)
            output = self.commands.run(argv).stdout.strip()
        except BaseException:
            (folder / attempts.CLAIM).unlink(missing_ok=True)
            raise
        job_id = output.split(";")[0].strip()
        record = {"job_id": job_id, "submitted_at": now(), "comment": comment, "by": "provider"}
        attempts.record_submission(folder, record)
        return outputs

    def cancel(self, address: str, run_id: str | None = None) -> None:
        ids = [
            s["job_id"]
            for folder, s, launch in self.read_submissions(address)
            if run_id is None or launch["run_id"] == run_id
        ]
        live = {j.job_id for j in self._queue_states() if not phase_of(j.state).finished}
        targets = [i for i in ids if i in live]
        if targets:
            self.commands.run(["scancel", *(check_job_id(target) for target in targets)])

    def interrupt(self, address: str, run_id: str) -> str:
        """A drill's fault: cancel one step of the run's running training job. A step srun
        started (a distributed launch) is cancelled with `scancel JOB.STEP`: srun fails the
        step, the runner sees its command fail with the job still RUNNING and retries as
        the job declares. A job whose command runs in its batch step has only that one:
        `scancel --full --signal=KILL JOB` kills it, runner and command (`--batch` would
        spare the batch shell's children, the training process among them), and the
        engine resumes the failed attempt as for any failure."""
        running = {j.job_id for j in self._queue_states() if phase_of(j.state) == "running"}
        live = [
            s["job_id"]
            for _, s, launch in self.read_submissions(address)
            if launch["run_id"] == run_id and launch["kind"] == "train" and s["job_id"] in running
        ]
        if not live:
            raise PermanentProviderError(
                f"cannot interrupt run {run_id} of {address}: no Slurm job of it runs"
            )
        job_id = check_job_id(live[-1])
        listed = self.commands.run(
            ["squeue", "--steps", "--noheader", "--format=%i", f"--jobs={job_id}"]
        ).stdout.split()
        steps = [
            s for s in listed if s.partition(".")[0] == job_id and s.partition(".")[2].isdigit()
        ]
        if steps:
            self.commands.run(["scancel", steps[-1]])
            return f"cancelled step {steps[-1]} of Slurm job {job_id} (scancel {steps[-1]})"
        self.commands.run(["scancel", "--full", "--signal=KILL", job_id])
        return (
            f"killed the batch step of Slurm job {job_id}, where its command runs "
            f"(scancel --full --signal=KILL {job_id})"
        )

    def runs(self, address: str) -> list[RunStatus]:
        return self.runs_of([address])[address]

    def runs_of(self, addresses: list[str]) -> dict[str, list[RunStatus]]:
        """Runs of many jobs from one squeue (and at most one sacct) call."""
        submissions = {address: self.read_submissions(address) for address in addresses}
        states = self.read_states(
            [s["job_id"] for found in submissions.values() for _, s, _ in found]
        )
        return {address: self._runs(found, states) for address, found in submissions.items()}

    def _runs(
        self, submissions: list[Submission], states: dict[str, list[SlurmJobState]]
    ) -> list[RunStatus]:
        runs: dict[str, RunStatus] = {}
        for folder, submission, launch in submissions:
            run = runs.setdefault(launch["run_id"], RunStatus(run_id=launch["run_id"]))
            progress = _progress(Path(launch["env"]["TRAINFORM_PROGRESS_FILE"]))
            status = attempt_status(
                launch["attempt"],
                folder,
                attempts.folder_files(folder, submission, launch),
                states.get(submission["job_id"], []),
                launch.get("queue", ""),
                progress,
            )
            if launch["kind"] == "eval":
                run.evaluations.append(
                    EvaluationStatus(
                        suite=launch["suite"],
                        run_id=launch["run_id"],
                        phase=status.phase,
                        metrics=_metrics(
                            Path(launch["env"]["TRAINFORM_METRICS_FILE"]), status.phase
                        ),
                        reason=status.reason,
                        log=status.log,
                    )
                )
                continue
            run.attempts.append(status)
            run.output_dir = launch["env"]["TRAINFORM_OUTPUT_DIR"]
            run.checkpoints = list_checkpoints(Path(launch["checkpoint_dir"]))
            newest = latest_valid(run.checkpoints)
            run.current_step = (
                progress if progress is not None else (newest.step if newest else None)
            )
        for run in runs.values():
            run.attempts.sort(key=lambda a: a.attempt)
        return list(runs.values())

    def owned_jobs(self) -> list[tuple[str, str]]:
        """(address, "TrainingJob") of every queued or running job carrying our comment."""
        owned = set()
        for job in self._queue_states():  # squeue also lists jobs finished a moment ago
            found = parse_comment(job.comment)
            if found and found[0] == self.manager and not phase_of(job.state).finished:
                owned.add((found[1], "TrainingJob"))
        return sorted(owned)

    def _require_association(self, launch: JobLaunch) -> None:
        """The submitting user needs the (user, project, queue) association a Quota makes;
        missing, it is transient (the Quota may be applying at this moment)."""
        user = pwd.getpwuid(os.getuid()).pw_name
        account = check_identifier(launch.project or "", "account")
        partition = check_identifier(launch.queue, "partition")
        text = self.commands.run(
            [
                "sacctmgr",
                "-nP",
                "show",
                "association",
                "where",
                f"user={user}",
                f"account={account}",
                f"partition={partition}",
                "format=User,QOS",
            ]
        ).stdout
        allowed = [line.split("|", 1)[1].split(",") for line in text.splitlines() if "|" in line]
        if not any(partition in qos for qos in allowed):
            raise TransientProviderError(
                f"cannot submit to queue {partition} for project {account}: user {user} has no "
                f"association with account {account} on partition {partition} (no Quota of "
                f"the project on the queue yet, or {user} is not one of the project's users)",
                retry_after=1.0,
            )

    # reading Slurm -------------------------------------------------------------------------

    def _queue_states(self) -> list[SlurmJobState]:
        return parse_jobs(self.commands.run(["squeue", "--all", "--json"]).stdout, "squeue")

    def read_accounting(self, *selection: str) -> list[SlurmJobState]:
        text = self.commands.run(
            ["sacct", "--json", "--allusers", "--duplicates", *selection]
        ).stdout
        return parse_jobs(text, "sacct")

    def read_states(self, job_ids: list[str]) -> dict[str, list[SlurmJobState]]:
        """Each job's records, oldest first, the current one last: squeue's, completed by
        sacct's records for jobs squeue does not show, has started, or requeued."""
        if not job_ids:
            return {}
        wanted = set(job_ids)
        queued = {j.job_id: j for j in self._queue_states() if j.job_id in wanted}
        history = [
            i
            for i in dict.fromkeys(job_ids)
            if i not in queued or not queued[i].pending or queued[i].restarts
        ]
        records: dict[str, list[SlurmJobState]] = {}
        if history:
            selection = ",".join(check_job_id(job_id) for job_id in history)
            for job in self.read_accounting("--starttime=1970-01-01", "--jobs", selection):
                if job.job_id in wanted:
                    records.setdefault(job.job_id, []).append(job)
        for found in records.values():
            found.sort(key=lambda j: j.submitted_at)
        for job_id, live in queued.items():
            found = records.setdefault(job_id, [])
            if found and found[-1].submitted_at == live.submitted_at:
                kept = found[-1]
                # squeue's state is fresher; sacct kept the reason a started job waited for
                found[-1] = (
                    live if live.pending else replace(live, reason=kept.reason, source="sacct")
                )
            else:
                found.append(live)
        return records

    def read_submissions(self, address: str) -> list[Submission]:
        """The attempts of `address` this manager submitted, from their folders."""
        found = []
        for folder in self._attempt_dirs(address):
            try:
                submission = json.loads((folder / attempts.SUBMISSION).read_text("utf-8"))
                launch = json.loads((folder / "launch.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if launch.get("address") == address and launch.get("manager") == self.manager:
                found.append((folder, submission, launch))
        return found

    # writing the attempt -------------------------------------------------------------------

    def _write_launch(self, launch: JobLaunch, folder: Path, comment: str = "") -> Path:
        layout = self._layout(launch.address, launch.run_id, launch.checkpoint_prefix)
        code = (folder.parents[1] / "code") if launch.kind == "eval" else layout.run_dir / "code"
        if launch.code_dir is not None:
            try:
                snapshot_code(Path(launch.code_dir), code, exclude=(self.root,))
            except FileNotFoundError as exc:
                raise PermanentProviderError(str(exc)) from None
        code.mkdir(parents=True, exist_ok=True)
        checkpoints = layout.checkpoint_dir
        env = {
            "PYTHONHASHSEED": "0",
            "PYTHONUNBUFFERED": "1",
            "TRAINFORM_JOB": launch.address,
            "TRAINFORM_RUN_ID": launch.run_id,
            "TRAINFORM_ATTEMPT": str(launch.attempt),
            "TRAINFORM_CHECKPOINT_DIR": str(checkpoints),
            "TRAINFORM_OUTPUT_DIR": str(layout.output_dir),
            "TRAINFORM_PROGRESS_FILE": str(folder.parents[1] / "progress.json"),
            "TRAINFORM_EVENTS_FILE": str(events_path(folder / attempts.LOG)),
            "TRAINFORM_PARAMETERS": json.dumps(launch.parameters, sort_keys=True),
        }
        if launch.checkpoint_interval is not None:
            env["TRAINFORM_CHECKPOINT_INTERVAL"] = str(launch.checkpoint_interval)
        if launch.keep_last is not None:
            env["TRAINFORM_KEEP_LAST"] = str(launch.keep_last)
        if launch.kind == "eval":
            env["TRAINFORM_MODEL_DIR"] = str(self._model_dir(launch))
            env["TRAINFORM_METRICS_FILE"] = str(folder / "metrics.json")
            env["TRAINFORM_EVAL_SUITE"] = launch.suite or ""
            env["TRAINFORM_OUTPUT_DIR"] = str(folder)
        for name, value in launch.parameters.items():
            env[f"TRAINFORM_PARAM_{variable_suffix(name)}"] = parameter_text(value)
        datasets = []
        for dataset in launch.datasets:
            location = dataset_folder(asdict(dataset), self.spec_root, self.data_roots)
            env[f"TRAINFORM_DATASET_{variable_suffix(dataset.name)}"] = str(location)
            datasets.append(
                {
                    "name": dataset.name,
                    "version": dataset.version,
                    "folder": str(location),
                    "manifest_digest": dataset.manifest_digest,
                }
            )
        env.update({str(k): str(v) for k, v in launch.env.items()})
        data = {
            "address": launch.address,
            "manager": self.manager,
            "run_id": launch.run_id,
            "attempt": launch.attempt,
            "kind": launch.kind,
            "suite": launch.suite,
            "command": list(launch.command),
            "cwd": str(code),
            "env": env,
            "datasets": datasets,
            "checkpoint_dir": str(checkpoints),
            "resume_from": launch.resume_from,
            "keep_last": launch.keep_last,
            "queue": launch.queue,
            "comment": comment,
            "retries": launch.retries,
            "backoff": launch.backoff,
            "resume": launch.resume,
            "sbatch_options": self._run_options(launch),
            "distributed": distributed_of(
                list(launch.command), launch.nodes, processes_per_node(launch.resources())
            ),
            "script": self._script(),
            "slurm": {
                "conf": self.commands.conf,
                "sbatch": self.commands.program("sbatch"),
                "squeue": self.commands.program("squeue"),
                "scontrol": self.commands.program("scontrol"),
            },
        }
        launch_file = folder / "launch.json"
        launch_file.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        return launch_file

    def _model_dir(self, launch: JobLaunch) -> Path:
        """What an evaluation reads: a run's output folder, or `[<run>/]step-<N>`."""
        target = launch.model_run or launch.run_id
        run_id, _, checkpoint = target.rpartition("/")
        if not STEP_FOLDER.match(checkpoint):
            return RunLayout(self.root, launch.address, target).output_dir
        run_id = run_id or launch.run_id
        for _folder, _, recorded in self.read_submissions(launch.address):
            if recorded["run_id"] == run_id and recorded["kind"] == "train":
                return Path(recorded["checkpoint_dir"]) / checkpoint
        return RunLayout(self.root, launch.address, run_id).checkpoint_dir / checkpoint

    def _script(self) -> dict[str, str]:
        return {
            "path": _inherited("PATH"),
            "python": sys.executable,
        }

    def _run_options(self, launch: JobLaunch) -> list[str]:
        """The sbatch options every attempt of the run shares (validated here)."""
        cpus = int(Decimal(launch.cpu).to_integral_value(ROUND_CEILING)) or 1
        per_node = launch.gpus // max(1, launch.nodes)
        options = [
            "--parsable",
            f"--job-name=tf-{check_identifier(launch.address.rsplit('/', 1)[-1], 'job name')}",
            f"--account={check_identifier(launch.project or '', 'account')}",
            f"--partition={check_identifier(launch.queue, 'partition')}",
            f"--qos={check_identifier(self.qos_of(launch.queue), 'QOS')}",
            f"--nodes={int(launch.nodes)}",
            "--ntasks-per-node=1",
            f"--cpus-per-task={cpus}",
            f"--mem={max(1, mebibytes(launch.memory))}M",
            "--requeue",
            "--open-mode=append",  # a requeued run adds to the log instead of replacing it
            "--export=NONE",
        ]
        if per_node:
            options.append(f"--gres={check_identifier(self.gres, 'GRES')}:{int(per_node)}")
        if launch.max_runtime:
            options.append(f"--time={slurm_minutes(launch.max_runtime)}")
        seconds = signal_seconds(launch)
        if seconds:
            options.append(f"--signal=B:USR1@{seconds}")
        if launch.image:  # a container Image; host runtimes run on the nodes as they are
            flag = "--container" if self.containers == "oci" else "--container-image"
            options.append(f"{flag}={launch.image}")
        return options

    def _sbatch(
        self, launch: JobLaunch, folder: Path, comment: str, launch_file: Path
    ) -> list[str]:
        options = self._run_options(launch)
        script = attempts.write_script(folder, launch_file, self._script())
        try:
            return attempts.sbatch_argv(options, folder, comment, script)
        except attempts.AttemptError as exc:
            raise PermanentProviderError(str(exc)) from None

    # reading logs and accounting (providers/slurm/history.py) ------------------------

    def read_log(
        self, address: str, run_id: str, attempt: int, offset: int = 0, suite: str | None = None
    ) -> LogChunk:
        return history.read_log(self, address, run_id, attempt, offset, suite)

    def accounting(self, since: str) -> list[AccountedRun]:
        return history.accounted_runs(self, since)


def _inherited(name: str) -> str:
    return os.environ.get(name, "/usr/local/bin:/usr/bin:/bin")


def _read_json(path: Path) -> dict[str, Any]:
    return attempts.read_json(path)


def _progress(path: Path) -> int | None:
    step = _read_json(path).get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _metrics(path: Path, phase: RunPhase) -> dict[str, float]:
    if phase != RunPhase.SUCCEEDED:
        return {}
    data = _read_json(path)
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}
