"""What runs inside a Slurm batch job: `python -m providers.slurm.runner <launch.json>`.

The batch script trainform generates (providers/slurm/jobs.py) `exec`s this module, so it
is the batch step's main process and receives `--signal=B:USR1@<seconds>`. It:

1. checks every pinned dataset version against its manifest digest (data mutated refuses
   the attempt), and the checkpoint to resume from (must be valid);
2. after a requeue (SLURM_RESTART_COUNT > 0) resumes from the run's latest valid
   checkpoint instead, so `scontrol requeue` continues the run;
3. starts the command (an argv list, in the run's code snapshot, with the trainform
   environment; through `srun`, one task per node, on a multi-node allocation), forwards
   USR1 (checkpoint now), TERM and INT to it;
4. records `result.json` (exit code, reason, resumed from) next to the launch, applies
   checkpoint retention, and exits with the command's code.

Standard library plus providers.local (checkpoint validation and dataset manifests).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from providers.local.checkpoints import apply_retention, check_checkpoint, latest_valid
from providers.local.checkpoints import list_checkpoints as listed
from providers.local.datasets import build_manifest

FORWARDED = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    if requeued and launch["kind"] == "train":
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


def command_of(launch: dict[str, Any], environ: Mapping[str, str]) -> list[str]:
    """The command argv; on a multi-node allocation, one task per node through srun.

    The spec's argv is exec'd as given, never joined into a shell string; after srun's own
    options `--` comes first, so no element of it can be read as an srun option."""
    nodes = int(environ.get("SLURM_JOB_NUM_NODES", "1") or 1)
    if nodes <= 1:
        return list(launch["command"])
    return [
        "srun",
        f"--nodes={nodes}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--",
        *launch["command"],
    ]


def _record(path: Path, result: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(result, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


def run(launch_file: Path) -> int:
    launch = json.loads(launch_file.read_text(encoding="utf-8"))
    result_file = launch_file.with_name("result.json")
    started = now()
    try:
        _datasets(launch)
        resume = _resume(launch)
    except Refused as exc:
        print(f"trainform: attempt refused: {exc}", flush=True)
        _record(result_file, {"exit_code": 2, "reason": str(exc), "started_at": started})
        return 2
    environment = {**launch["env"], **resume, "SLURM_JOB_ID": os.environ.get("SLURM_JOB_ID", "")}
    for name in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER"):
        if name in os.environ and name not in launch["env"]:
            environment[name] = os.environ[name]
    for name, value in os.environ.items():
        if name.startswith(("SLURM_", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")):
            environment.setdefault(name, value)
    Path(launch["env"]["TRAINFORM_OUTPUT_DIR"]).mkdir(parents=True, exist_ok=True)
    Path(launch["checkpoint_dir"]).mkdir(parents=True, exist_ok=True)
    print(
        f"trainform: starting {launch['command']!r} resume={resume['TRAINFORM_RESUME_FROM']!r}",
        flush=True,
    )
    received: list[int] = []
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
    child = subprocess.Popen(
        command_of(launch, os.environ),
        cwd=launch["cwd"],
        env=environment,
        start_new_session=True,
    )
    children.append(child)
    code = child.wait()
    reason = "" if code == 0 else f"exited with {code}"
    if code < 0:
        reason = f"killed by signal {signal.Signals(-code).name}"
    keep = launch.get("keep_last")
    if keep and launch["kind"] == "train":
        protect = [resume["TRAINFORM_RESUME_FROM"]] if resume["TRAINFORM_RESUME_FROM"] else []
        apply_retention(Path(launch["checkpoint_dir"]), int(keep), protect)
    _record(
        result_file,
        {
            "exit_code": code,
            "reason": reason,
            "started_at": started,
            "ended_at": now(),
            "resumed_from": resume["TRAINFORM_RESUME_FROM"],
            "signals": [signal.Signals(n).name for n in received],
        },
    )
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
