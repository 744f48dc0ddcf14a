"""What runs inside a Slurm batch job: `python -m trainform.providers.slurm.runner <launch.json>`.

The batch script trainform generates (providers/slurm/attempts.py) `exec`s this module, so
it is the batch step's main process and receives `--signal=B:USR1@<seconds>`. It:

1. checks every pinned dataset version against its manifest digest (data mutated refuses
   the attempt), and the checkpoint to resume from (must be valid); a refusal is recorded
   as `"refused": true` in result.json (the evidence the provider classifies by) and the
   runner exits 2 without starting the command;
2. after a requeue (SLURM_RESTART_COUNT > 0) resumes from the run's latest valid
   checkpoint instead, so `scontrol requeue` continues the run; every start is appended to
   `starts.json` (time, restart count, checkpoint resumed from and its step);
3. starts the command (an argv list, in the run's code snapshot, with the trainform
   environment); a distributed one through `srun`, one launcher per node for torchrun or
   one task per process otherwise, with the launch contract's variables and the rendezvous
   on the job's first node (providers/slurm/distributed.py); forwards USR1 (checkpoint
   now), TERM and INT to it (srun passes them on to every task);
4. when the command failed by itself (no TERM or INT from Slurm, and the controller still
   shows the job RUNNING: a cancel, requeue, time limit or preemption is not retried here;
   Slurm's own requeue or the engine covers those) and `retries` allows another attempt,
   submits the next attempt with `sbatch --begin=now+<retry_delay>` from the latest valid
   checkpoint (or from scratch with resume "never"), the same sbatch options and the
   ownership comment of that attempt, and records it in both attempt folders;
5. records `result.json` (exit code, reason, resumed from, the last step the progress file
   reached, the retry it submitted) next to the launch, applies checkpoint retention, and
   exits with the command's code.

Standard library plus providers.local (checkpoint validation and dataset manifests) and
providers/slurm/attempts.py (the next attempt's folder and sbatch command).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainform.providers.jobs import retry_delay
from trainform.providers.local.checkpoints import apply_retention, check_checkpoint, latest_valid
from trainform.providers.local.checkpoints import list_checkpoints as listed
from trainform.providers.local.datasets import build_manifest
from trainform.providers.run_events import events_path
from trainform.providers.slurm import attempts, distributed
from trainform.runtime.protocol import EVENTS_VARIABLE

FORWARDED = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)
STOPPING = (signal.SIGTERM, signal.SIGINT)
REFUSED_EXIT = 2
SBATCH_TRIES = 3
SETTLE = 0.5


def now() -> str:
    """This moment, ISO-8601 UTC to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Refused(Exception):
    pass


def _datasets(launch: dict[str, Any]) -> None:
    for dataset in launch.get("datasets", []):
        folder = Path(dataset["folder"])
        label = f"dataset {dataset['name']}@{dataset['version']}"
        if not folder.is_dir():
            raise Refused(f"{label}: folder {folder} does not exist")
        pinned = dataset.get("manifest_digest") or ""
        if pinned and build_manifest(folder).digest != pinned:
            raise Refused(f"{label} changed since it was pinned (data mutated)")


def _resume(launch: dict[str, Any]) -> dict[str, str]:
    checkpoints = Path(launch["checkpoint_dir"])
    requeued = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) > 0
    if requeued and launch["kind"] == "train" and launch.get("resume", "latest") != "never":
        newest = latest_valid(listed(checkpoints))
        if newest is not None:
            return {"TRAINFORM_RESUME_FROM": newest.path, "TRAINFORM_RESUME_STEP": str(newest.step)}
    chosen = launch.get("resume_from") or ""
    if not chosen:
        return {"TRAINFORM_RESUME_FROM": "", "TRAINFORM_RESUME_STEP": "0"}
    folder = checkpoints / chosen
    if not folder.is_dir():
        raise Refused(f"checkpoint {chosen} to resume from does not exist")
    status = check_checkpoint(folder)
    if not status.valid:
        raise Refused(f"checkpoint {chosen} is not valid: {status.problem}")
    return {"TRAINFORM_RESUME_FROM": str(folder), "TRAINFORM_RESUME_STEP": str(status.step)}


def command_of(launch: dict[str, Any], environ: Mapping[str, str], master: str = "") -> list[str]:
    """The command argv: as given for one process (or one torchrun node), else through
    srun and the node launcher (providers/slurm/distributed.py), `master` the rendezvous
    host. A launch.json from before `distributed` runs one task per allocated node.

    The spec's argv is exec'd as given, never joined into a shell string; after srun's own
    options `--` comes first, so no element of it can be read as an srun option."""
    if "distributed" not in launch:
        nodes = int(environ.get("SLURM_JOB_NUM_NODES", "1") or 1)
        if nodes <= 1:
            return list(launch["command"])
        return distributed.legacy_srun_argv(list(launch["command"]), nodes)
    job = distributed.launch_in(launch, environ)
    if not distributed.uses_srun(job):
        return list(launch["command"])
    return distributed.srun_argv(launch, job, environ, master)


def _launch(launch: dict[str, Any], environment: dict[str, str]) -> list[str]:
    """The argv to start, after adding what a command started directly needs to
    `environment`; says in the log how the job is launched."""
    if "distributed" not in launch:
        return command_of(launch, os.environ)
    job = distributed.launch_in(launch, os.environ)
    if not job.distributed and not job.torchrun:
        return command_of(launch, os.environ)
    master = distributed.first_node(launch, os.environ)
    if not distributed.uses_srun(job):
        environment.update(distributed.direct_environment(job, master))
    print(
        f"trainform: launching {job.nodes} node(s) x {job.procs_per_node} process(es) "
        f"({'torchrun' if job.torchrun else 'one task per process'}), rendezvous "
        f"{master}:{job.port}",
        flush=True,
    )
    return command_of(launch, os.environ, master)


def _record(path: Path, result: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(result, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


def _progress_step(launch: dict[str, Any]) -> int | None:
    path = launch.get("env", {}).get("TRAINFORM_PROGRESS_FILE")
    if not path:
        return None
    step = attempts.read_json(Path(path)).get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _record_start(folder: Path, resume: dict[str, str], launch: dict[str, Any]) -> None:
    """One entry per start of the attempt; a restart after a requeue also records the
    step the run before it reached (the progress file it left), so its loss is known."""
    starts = attempts.read_json(folder / "starts.json").get("starts", [])
    step = resume["TRAINFORM_RESUME_STEP"]
    restart = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    entry = {
        "at": now(),
        "job_id": os.environ.get("SLURM_JOB_ID", ""),
        "restart": restart,
        "resumed_from": resume["TRAINFORM_RESUME_FROM"],
        "resumed_step": int(step) if resume["TRAINFORM_RESUME_FROM"] else None,
    }
    if restart:
        entry["before_step"] = _progress_step(launch)
    starts.append(entry)
    _record(folder / "starts.json", {"starts": starts})


def _sbatch_environment(launch: dict[str, Any]) -> dict[str, str]:
    """This job's environment without what would make sbatch read it as options or as
    belonging to this allocation, with the cluster's SLURM_CONF."""
    prefixes = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    conf = launch.get("slurm", {}).get("conf") or os.environ.get("SLURM_CONF", "")
    if conf:
        environment["SLURM_CONF"] = conf
    return environment


def _submit_retry(launch: dict[str, Any], launch_file: Path) -> dict[str, Any]:
    """Submit the next attempt of the run after its backoff; what happened, for result.json."""
    attempt = int(launch["attempt"]) + 1
    delay = retry_delay(int(launch.get("backoff") or 0), attempt - 1)
    folder = launch_file.parent.parent / str(attempt)
    folder.mkdir(parents=True, exist_ok=True)
    retry: dict[str, Any] = {"attempt": attempt, "delay": delay}
    if (folder / attempts.SUBMISSION).exists() or not attempts.claim(folder):
        return {**retry, "skipped": "the attempt was submitted already"}
    resume_from = None
    if launch.get("resume", "latest") != "never":
        newest = latest_valid(listed(Path(launch["checkpoint_dir"])))
        resume_from = Path(newest.path).name if newest else None
    comment = attempts.next_comment(launch["comment"], attempt)
    environment = {**launch["env"], "TRAINFORM_ATTEMPT": str(attempt)}
    if EVENTS_VARIABLE in environment:  # each attempt's events beside its own log
        environment[EVENTS_VARIABLE] = str(events_path(folder / attempts.LOG))
    following = {
        **launch,
        "attempt": attempt,
        "resume_from": resume_from,
        "comment": comment,
        "env": environment,
    }
    following_file = folder / "launch.json"
    _record(following_file, following)
    script = attempts.write_script(folder, following_file, launch["script"])
    argv = attempts.sbatch_argv(launch["sbatch_options"], folder, comment, script, delay)
    program = launch.get("slurm", {}).get("sbatch") or "sbatch"
    output = ""
    for tries in range(SBATCH_TRIES):
        try:
            completed = subprocess.run(
                [program, *argv[1:]],
                capture_output=True,
                text=True,
                timeout=60,
                env=_sbatch_environment(launch),
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            output = str(exc)
        else:
            output = (completed.stdout + completed.stderr).strip()
            if completed.returncode == 0:
                job_id = completed.stdout.strip().split(";")[0].strip()
                submitted = now()
                attempts.record_submission(
                    folder,
                    {
                        "job_id": job_id,
                        "submitted_at": submitted,
                        "comment": comment,
                        "by": "runner",
                        "retry_of": attempt - 1,
                        "delay": delay,
                    },
                )
                print(
                    f"trainform: attempt {attempt} submitted as job {job_id}, starting after "
                    f"its retry backoff of {delay}s"
                    + (f" from checkpoint {resume_from}" if resume_from else " from scratch"),
                    flush=True,
                )
                return {**retry, "job_id": job_id, "submitted_at": submitted}
        if tries + 1 < SBATCH_TRIES:
            time.sleep(1 + tries)
    (folder / attempts.CLAIM).unlink(missing_ok=True)
    print(f"trainform: cannot submit attempt {attempt}: {output}", flush=True)
    return {**retry, "error": output}


def _still_running(launch: dict[str, Any]) -> bool:
    """Whether the controller still holds this job as RUNNING. A cancel, requeue,
    preemption or time limit changes the job's state there before its processes are
    signalled, so a command killed by Slurm is never retried by the runner as well."""
    job_id = os.environ.get("SLURM_JOB_ID", "")
    program = launch.get("slurm", {}).get("squeue") or "squeue"
    if not job_id.isdigit():
        return False
    try:
        completed = subprocess.run(
            [program, "--json", "--jobs", job_id],
            capture_output=True,
            text=True,
            timeout=30,
            env=_sbatch_environment(launch),
            stdin=subprocess.DEVNULL,
            check=False,
        )
        jobs = json.loads(completed.stdout).get("jobs", [])
    except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError):
        return False
    states = [job.get("job_state") for job in jobs if str(job.get("job_id")) == job_id]
    return states == ["RUNNING"] or states == [["RUNNING"]]


def _retry_wanted(launch: dict[str, Any], code: int, received: list[int]) -> bool:
    if code == 0 or launch.get("kind") != "train" or not launch.get("sbatch_options"):
        return False
    if int(launch.get("attempt") or 1) > int(launch.get("retries") or 0):
        return False
    time.sleep(SETTLE)  # signals Slurm sends the whole job reach the runner too
    if any(number in STOPPING for number in received):
        return False  # Slurm stopped it (cancel, time limit, preemption): not a failure here
    if not _still_running(launch):
        print("trainform: Slurm is ending or requeueing the job: no retry from here", flush=True)
        return False
    return True


def run(launch_file: Path) -> int:
    launch = json.loads(launch_file.read_text(encoding="utf-8"))
    result_file = launch_file.with_name("result.json")
    started = now()
    try:
        _datasets(launch)
        resume = _resume(launch)
    except Refused as exc:
        return _refuse(result_file, exc, started)
    _record_start(launch_file.parent, resume, launch)
    environment = _command_environment(launch, resume)
    Path(launch["env"]["TRAINFORM_OUTPUT_DIR"]).mkdir(parents=True, exist_ok=True)
    Path(launch["checkpoint_dir"]).mkdir(parents=True, exist_ok=True)
    print(
        f"trainform: starting {launch['command']!r} resume={resume['TRAINFORM_RESUME_FROM']!r}",
        flush=True,
    )
    received: list[int] = []
    code = _run_command(launch, environment, received)
    ended = now()
    reason = "" if code == 0 else f"exited with {code}"
    if code < 0:
        reason = f"killed by signal {signal.Signals(-code).name}"
    print(f"trainform: the command {reason or 'succeeded'}", flush=True)
    _keep_last(launch, resume)
    result = _result(launch, resume, code, reason, received, started, ended)
    if _retry_wanted(launch, code, received):
        result["retry"] = _retry(launch, launch_file)
    _record(result_file, result)
    return _exit_code(code)


def _exit_code(code: int) -> int:
    """The command's exit code; a signal's number as a shell reports it (128 + N)."""
    return code if code >= 0 else 128 - code


def _refuse(result_file: Path, exc: Refused, started: str) -> int:
    """Record the attempt as refused before its command started."""
    print(f"trainform: attempt refused: {exc}", flush=True)
    _record(
        result_file,
        {
            "exit_code": REFUSED_EXIT,
            "reason": str(exc),
            "refused": True,
            "started_at": started,
            "ended_at": now(),
        },
    )
    return REFUSED_EXIT


def _command_environment(launch: dict[str, Any], resume: dict[str, str]) -> dict[str, str]:
    """The launch's environment and resume point, a few of the runner's own variables, and
    what Slurm set for the allocation (its SLURM_* variables and the visible GPUs)."""
    environment = {**launch["env"], **resume, "SLURM_JOB_ID": os.environ.get("SLURM_JOB_ID", "")}
    for name in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER"):
        if name in os.environ and name not in launch["env"]:
            environment[name] = os.environ[name]
    for name, value in os.environ.items():
        if name.startswith(("SLURM_", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")):
            environment.setdefault(name, value)
    return environment


def _run_command(launch: dict[str, Any], environment: dict[str, str], received: list[int]) -> int:
    """Start the command in a session of its own and wait for it; every FORWARDED signal
    is passed on to it and appended to `received` (also those arriving after it ended)."""
    children: list[subprocess.Popen[bytes]] = []

    def forward(number: int, _frame: Any) -> None:
        received.append(number)
        for child in children:
            try:
                os.killpg(child.pid, number)
            except ProcessLookupError:
                pass

    for number in FORWARDED:  # installed first: an early signal never kills the runner
        signal.signal(number, forward)
    argv = _launch(launch, environment)
    child = subprocess.Popen(
        argv,
        cwd=launch["cwd"],
        env=environment,
        start_new_session=True,
    )
    children.append(child)
    return child.wait()


def _keep_last(launch: dict[str, Any], resume: dict[str, str]) -> None:
    """Checkpoint retention after a training command, sparing the one it resumed from."""
    keep = launch.get("keep_last")
    if keep and launch["kind"] == "train":
        protect = [resume["TRAINFORM_RESUME_FROM"]] if resume["TRAINFORM_RESUME_FROM"] else []
        apply_retention(Path(launch["checkpoint_dir"]), int(keep), protect)


def _result(
    launch: dict[str, Any],
    resume: dict[str, str],
    code: int,
    reason: str,
    received: list[int],
    started: str,
    ended: str,
) -> dict[str, Any]:
    """What result.json records of the command's run."""
    result: dict[str, Any] = {
        "exit_code": _exit_code(code),
        "reason": reason,
        "started_at": started,
        "ended_at": ended,
        "resumed_from": resume["TRAINFORM_RESUME_FROM"],
        "resumed_step": int(resume["TRAINFORM_RESUME_STEP"] or 0)
        if resume["TRAINFORM_RESUME_FROM"]
        else None,
        "last_step": _progress_step(launch),
        "signals": [signal.Signals(n).name for n in received],
    }
    if code < 0:
        result["signal"] = -code
    return result


def _retry(launch: dict[str, Any], launch_file: Path) -> dict[str, Any]:
    """The next attempt submitted, or why it could not be."""
    try:
        return _submit_retry(launch, launch_file)
    except (OSError, KeyError, ValueError, attempts.AttemptError) as exc:
        print(f"trainform: cannot submit the next attempt: {exc}", flush=True)
        return {"error": str(exc)}


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
