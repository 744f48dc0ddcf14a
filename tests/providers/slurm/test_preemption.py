"""A job preempted on the real Slurm cluster: its timeline and usage from sacct's records.

Pure first: sacct's records of a preempted, requeued job (one per run, `--duplicates`)
become one attempt with two runs, the requeue hold apart from the run time, and usage
charged run by run. Then on the test cluster (PreemptType=preempt/qos, PreemptMode=
REQUEUE): a TrainingJob applied through the CLI runs on a queue whose QOS a hand-made QOS
may preempt; at step 5 (checkpoint at step 4) a job of that QOS takes all the node's GPUs,
Slurm preempts and requeues the training job, the test ends its requeue hold
(`scontrol update StartTime=now`) and the job resumes from step 4 and succeeds. `status`
says preempted, with the hold apart from run time and one step lost; `usage` matches the
GPU-hours sacct records (Elapsed x AllocTRES of each run) within 5%.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from trainform.cli.render.status_text import attempt_lines
from trainform.planner.session import ProviderSet
from trainform.planner.timeline import attempt_timelines, delivery
from trainform.planner.usage import compute_usage
from trainform.providers.jobs import AccountedRun, RunPhase, RunStatus
from trainform.providers.slurm.status import SlurmJobState
from trainform.providers.slurm.timeline import attempt_status
from trainform.specs import load_specs

from tests.engine.support import run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

TRAIN = """
import hashlib, json, os, time
from pathlib import Path

checkpoints = Path(os.environ["TRAINFORM_CHECKPOINT_DIR"])
output = Path(os.environ["TRAINFORM_OUTPUT_DIR"])
progress = Path(os.environ["TRAINFORM_PROGRESS_FILE"])
resume = os.environ.get("TRAINFORM_RESUME_FROM", "")
step = json.loads((Path(resume) / "state.json").read_text())["step"] if resume else 0
print(f"starts at step {step}", flush=True)
while step < 8:
    step += 1
    print(f"step {step}", flush=True)
    if step % 2 == 0:
        folder = checkpoints / f"step-{step:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"step": step}).encode()
        (folder / "state.json").write_bytes(data)
        files = [{"path": "state.json", "size": len(data),
                  "sha256": hashlib.sha256(data).hexdigest()}]
        (folder / "manifest.json").write_text(json.dumps({"step": step, "files": files}))
    progress.write_text(json.dumps({"step": step}))
    if step == 5 and not resume:
        output.mkdir(parents=True, exist_ok=True)
        (output / "waiting").write_text("preempt me")
        time.sleep(90)  # preempted here
output.mkdir(parents=True, exist_ok=True)
(output / "model.json").write_text(json.dumps({"steps": step}))
"""


def record(state: str, **values: Any) -> SlurmJobState:
    base: dict[str, Any] = {
        "job_id": "7",
        "state": state,
        "reason": "None",
        "exit_code": 0,
        "comment": "",
        "submitted_at": "2030-01-01T00:00:00Z",
        "source": "sacct",
        "tres": {"cpu": 1.0, "gres/gpu": 1.0, "node": 1.0},
    }
    return SlurmJobState(**{**base, **values})


RUNS = [
    record(
        "PREEMPTED",
        started_at="2030-01-01T00:00:05Z",
        ended_at="2030-01-01T00:01:10Z",
        elapsed=65,
    ),
    record(
        "COMPLETED",
        reason="BeginTime",
        submitted_at="2030-01-01T00:01:10Z",
        eligible_at="2030-01-01T00:03:11Z",
        started_at="2030-01-01T00:03:13Z",
        ended_at="2030-01-01T00:03:23Z",
        elapsed=10,
        tres={"cpu": 2.0, "gres/gpu": 2.0, "node": 1.0},
    ),
]
STARTS = {"starts": [{"restart": 0}, {"restart": 1, "resumed_step": 4, "before_step": 5}]}


def test_a_preempted_run_is_one_attempt_with_its_hold_apart_from_its_run_time() -> None:
    status = attempt_status(
        1, Path("/x"), {"result": {"exit_code": 0}, "starts": STARTS}, RUNS, "q", None
    )
    assert [(r.stopped_by, r.elapsed, r.gpus) for r in status.runs] == [
        ("preempted", 65, 1),
        ("", 10, 2),
    ]
    assert status.waits[-1].reason == (
        "preempted, then requeued by Slurm: waiting out its requeue delay until "
        "2030-01-01T00:03:11Z"
    )
    run = RunStatus("r", [status])
    [timeline] = attempt_timelines(run)
    assert (timeline.ran, timeline.held, timeline.waited) == (75, 123, 5)
    [requeue] = timeline.requeues
    assert (requeue.stopped.last_step, requeue.lost_steps, requeue.lost_seconds) == (5, 1, None)
    assert delivery([timeline]).lost_steps == 1 and delivery([timeline]).held == 123
    text = "\n".join(attempt_lines(timeline.to_json(), color=False))
    assert "held 2m03s between runs (requeued)" in text
    assert "ran 2030-01-01 00:00:05 -> 2030-01-01 00:03:23 (1m15s)" in text
    assert (
        "preempted 2030-01-01 00:01:10 after running 1m05s (step 5), held 2m03s before it "
        "ran again; lost 1 step" in text
    )
    window = (datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 1, 2, tzinfo=UTC))
    usage = compute_usage([AccountedRun("TrainingJob/p/j", "p", "q", run)], window, "project")
    assert usage.rows[0].gpu_hours == pytest.approx((65 * 1 + 10 * 2) / 3600)


def test_a_requeued_job_still_held_says_what_stopped_it() -> None:
    held = record(
        "PENDING",
        reason="BeginTime",
        submitted_at="2030-01-01T00:01:10Z",
        eligible_at="2030-01-01T00:03:11Z",
        source="squeue",
        restarts=1,
    )
    status = attempt_status(1, Path("/x"), {}, [RUNS[0], held], "q", None)
    assert status.phase == RunPhase.QUEUED
    assert status.reason.startswith("preempted, then requeued by Slurm: waiting out its requeue")
    now = datetime(2030, 1, 1, 0, 2, tzinfo=UTC)
    [timeline] = attempt_timelines(RunStatus("r", [status]), now)
    assert timeline.ran == 65 and timeline.held == 50


def test_a_cancelled_job_says_cancelled_once() -> None:
    status = attempt_status(
        1,
        Path("/x"),
        {},
        [record("CANCELLED", started_at="2030-01-01T00:00:05Z", ended_at="2030-01-01T00:00:09Z")],
        "q",
        None,
    )
    assert status.phase == RunPhase.CANCELLED and status.reason == ""


def tf(root: Path, *args: str) -> str:
    result = run_trainform(*args, cwd=root, timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in output, output
    return output


def poll(check: Any, timeout: float = 60, interval: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(interval)


@pytest.fixture(scope="module")
def platform(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    p = fixtures.unique_prefix("r")
    root = tmp_path_factory.mktemp("slurm-preempt") / "specs"
    (root / "code").mkdir(parents=True)
    (root / "code" / "train.py").write_text(TRAIN)
    (root / "trainform.yaml").write_text(
        fixtures.config(slurm_cluster, slurm_cluster.job_root / p, local=False)
    )
    project, queue, pool = f"{p}-a", f"{p}-lo", f"{p}-pool"
    job = (
        "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: host}\nspec: {runtime: host}\n"
        "---\napiVersion: trainform/v1\nkind: TrainingJob\n"
        f"metadata: {{name: victim, project: {project}}}\n"
        f"spec:\n  queue: {queue}\n  image: host\n  code: {{repo: code}}\n"
        "  command: [python3, train.py]\n"
        "  resources: {nodes: 1, cpu: 1, memory: 128Mi, acceleratorsPerNode: 1}\n"
        "  checkpoint: {interval: 1m, keepLast: 4}\n  maxRuntime: 10m\n"
    )
    documents = [
        fixtures.pool(slurm_cluster, pool),
        fixtures.project(project),
        fixtures.queue(queue, pool),
        fixtures.quota(f"{project}-q", project, queue, "{cpu: 8}"),
        job,
    ]
    (root / "platform.yaml").write_text("---\n".join(documents))
    urgent = f"{p}-urgent"
    done = slurm_cluster.run(["sacctmgr", "-i", "add", "qos", urgent, "Priority=100"])
    assert done.returncode == 0, done.stderr
    tf(root, "apply", ".", "--auto-approve")  # the platform, and the job submitted
    for argv in (  # the queue's QOS exists now: a QOS that may preempt it
        ["modify", "qos", "where", f"name={urgent}", "set", f"Preempt={queue}"],
        ["modify", "user", "where", "name=root", f"account={project}", f"partition={queue}"]
        + ["set", f"qos+={urgent}"],
    ):
        done = slurm_cluster.run(["sacctmgr", "-i", *argv])
        assert done.returncode == 0, done.stderr
    providers = ProviderSet(load_specs(root).config, root)
    try:
        yield {
            "root": root,
            "project": project,
            "queue": queue,
            "urgent": urgent,
            "provider": providers.get("hpc"),
        }
    finally:
        providers.close()
        fixtures.cleanup(slurm_cluster, p)
        slurm_cluster.run(["sacctmgr", "-i", "delete", "qos", urgent])


def sacct_gpu_hours(cluster: SlurmCluster, job_id: str) -> tuple[float, list[str]]:
    text = cluster.run(
        [
            "sacct",
            "--duplicates",
            "-X",
            "-n",
            "-P",
            "-j",
            job_id,
            "-o",
            "State,ElapsedRaw,AllocTRES",
        ]
    ).stdout
    total, states = 0.0, []
    for line in text.splitlines():
        state, elapsed, tres = line.split("|")
        states.append(state.split()[0])
        gpus = next((t.split("=")[1] for t in tres.split(",") if t.startswith("gres/gpu=")), "0")
        total += int(elapsed) * int(gpus) / 3600
    return total, states


@pytest.mark.slow
def test_a_preempted_job_shows_preempted_with_its_hold_apart_and_usage_matches_sacct(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root, provider, project = platform["root"], platform["provider"], platform["project"]
    address = f"TrainingJob/{project}/victim"

    def run() -> RunStatus:
        [found] = provider.runs(address)
        return found

    job_root = slurm_cluster.job_root
    poll(lambda: list(job_root.glob(f"**/{project}/**/output/waiting")), timeout=90)
    [job_id] = [
        line.split()[0]
        for line in slurm_cluster.run(
            ["squeue", "--noheader", "--format=%i %k"]
        ).stdout.splitlines()
        if f":{address}:" in line
    ]
    preemptor = slurm_cluster.run(
        [
            "sbatch",
            "--parsable",
            f"--account={project}",
            f"--partition={platform['queue']}",
            f"--qos={platform['urgent']}",
            "--cpus-per-task=1",
            f"--gres=gpu:{slurm_cluster.gpus}",
            "--mem=64M",
            f"--output={job_root}/{project}-urgent.log",
            "--wrap=sleep 2",
        ]
    )
    assert preemptor.returncode == 0, preemptor.stderr

    def requeued() -> bool:
        shown = slurm_cluster.run(["squeue", "--noheader", "-j", job_id, "-o", "%T %r"]).stdout
        return shown.startswith("PENDING") and "BeginTime" in shown

    poll(requeued)
    # slurmdbd records the preempted step a moment after squeue shows the requeue; until
    # then accounting reads the step as completed.
    poll(lambda: [r.stopped_by for r in run().attempts[0].runs][:1] == ["preempted"], timeout=30)
    [held] = run().attempts
    assert held.phase == RunPhase.QUEUED and held.runs[0].stopped_by == "preempted"
    text = tf(root, "status", "-v", "--dir", ".")
    assert "preempted, then requeued by Slurm" in text, text
    update = slurm_cluster.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"])
    assert update.returncode == 0, update.stderr
    poll(lambda: run().attempts[0].phase == RunPhase.SUCCEEDED, timeout=90)

    report = json.loads(tf(root, "status", "--dir", ".", "--format", "json"))
    [attempt] = [j for j in report["jobs"] if j["address"] == address][0]["attempts"]
    [requeue] = attempt["requeues"]
    assert requeue["stoppedBy"] == "preempted" and requeue["lastStep"] == 5
    assert requeue["lostSteps"] == 1 and attempt["resumedFrom"] is None
    sacct_hours, states = sacct_gpu_hours(slurm_cluster, job_id)
    assert states == ["PREEMPTED", "COMPLETED"], states
    whole = (
        datetime.fromisoformat(attempt["endedAt"].replace("Z", "+00:00"))
        - datetime.fromisoformat(attempt["startedAt"].replace("Z", "+00:00"))
    ).total_seconds()
    assert attempt["ranSeconds"] + attempt["heldSeconds"] == pytest.approx(whole, abs=2)
    assert attempt["heldSeconds"] > 0 and attempt["ranSeconds"] == pytest.approx(
        sacct_hours * 3600, abs=1
    )
    text = tf(root, "status", "-v", "--dir", ".")
    assert "preempted" in text and "held" in text and "1 step" in text, text
    usage = json.loads(tf(root, "usage", "--dir", ".", "--since", "1h", "--format", "json"))
    [row] = [r for r in usage["rows"] if r["group"] == project]
    assert row["acceleratorHours"] == pytest.approx(sacct_hours, rel=0.05)
