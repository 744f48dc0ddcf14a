"""Fast tests of the Slurm provider's pure parts: names, units, the managed file, job
states from recorded squeue/sacct JSON (Slurm 22.05.8), node lines and sbatch argv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainform.providers.errors import PermanentProviderError, TransientProviderError
from trainform.providers.jobs import JobLaunch, RunPhase
from trainform.providers.slurm import mapping, settings
from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.jobs import SlurmJobs, comment_of, parse_comment, signal_seconds
from trainform.providers.slurm.names import (
    check_identifier,
    marker,
    parse_marker,
    parse_slurm_time,
    parse_tres,
    render_tres,
)
from trainform.providers.slurm.nodes import group_pools, parse_nodes
from trainform.providers.slurm.partitions import Block, parse_file, render_file, syntax_problems
from trainform.providers.slurm.status import parse_jobs, phase_of, readable_reason

DATA = Path(__file__).parent / "data"
NODE_LINE = (
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.99 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:4 NodeAddr=127.0.0.1 "
    "NodeHostName=vm Version=22.05.8 OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0  "
    "RealMemory=8192 AllocMem=0 FreeMem=22722 Sockets=8 Boards=1 State=IDLE ThreadsPerCore=1"
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("01:00:00", 3600, id="clock"),
        pytest.param("2-00:30:00", 2 * 86400 + 1800, id="days"),
        pytest.param("90", 5400, id="minutes"),
        pytest.param("05:30", 330, id="minutes-seconds"),
        pytest.param("UNLIMITED", None, id="unlimited"),
        pytest.param("", None, id="empty"),
    ],
)
def test_slurm_times_parse_to_seconds(text: str, seconds: int | None) -> None:
    assert parse_slurm_time(text) == seconds


def test_tres_round_trips_through_slurm_spelling() -> None:
    amounts = {"gpu": "2", "cpu": "8", "memory": str(16 * 2**30)}
    text = render_tres(amounts)
    assert text == "cpu=8,mem=16384M,gres/gpu=2"
    assert parse_tres(text) == amounts
    assert parse_tres("cpu=8,gres/gpu=4,mem=8G") == {
        "cpu": "8",
        "gpu": "4",
        "memory": str(8 * 2**30),
    }


@pytest.mark.parametrize("bad", ["Bad;rm", "a b", "", "-x", "x" * 64, "root'"])
def test_identifiers_that_slurm_could_not_hold_are_refused(bad: str) -> None:
    with pytest.raises(PermanentProviderError, match="cannot use"):
        check_identifier(bad, "account")


def test_identifiers_are_lowercased() -> None:
    assert check_identifier("Team-A", "account") == "team-a"


def test_markers_survive_slurm_lowercasing_descriptions() -> None:
    text = marker("trainform", "Project/alpha").lower()
    assert parse_marker(text) == ("trainform", "project/alpha")
    assert parse_marker("default root account") is None


def test_managed_file_keeps_foreign_lines_and_round_trips() -> None:
    text = (
        "# Slurm partitions written by trainform\n"
        "# trainform:trainform:ResourcePool/gpus\n# pool Nodes=vm\n"
        "# trainform:other:Queue/b\nPartitionName=b Nodes=vm QOS=b State=UP\n"
        "PartitionName=handmade Nodes=vm\n"
    )
    managed = parse_file(text)
    assert [b.address for b in managed.blocks] == ["ResourcePool/gpus", "Queue/b"]
    assert managed.blocks[0].is_pool and managed.blocks[0].settings == {"Nodes": "vm"}
    assert "PartitionName=handmade Nodes=vm" in managed.others
    assert set(managed.partitions()) == {"b", "handmade"}
    again = parse_file(render_file(managed))
    assert again.blocks == managed.blocks and again.others == managed.others


def test_unknown_partition_settings_are_syntax_problems() -> None:
    managed = parse_file("")
    managed.put(Block("trainform", "Queue/q", "PartitionName=q Nodes=vm Bogus=1 Loose"))
    problems = syntax_problems(managed)
    assert any("unknown partition setting Bogus" in p for p in problems)
    assert any("'Loose' is not Key=Value" in p for p in problems)


def test_recorded_squeue_output_gives_states_reasons_and_comments() -> None:
    jobs = {j.job_id: j for j in parse_jobs((DATA / "squeue-pending.json").read_text(), "squeue")}
    assert jobs["20"].state == "PENDING" and jobs["20"].reason == "AssocGrpGRES"
    assert parse_comment(jobs["20"].comment) == ("trainform", "TrainingJob/alpha/b")
    assert phase_of(jobs["19"].state) == RunPhase.RUNNING
    assert phase_of(jobs["17"].state) == RunPhase.SUCCEEDED
    assert jobs["19"].started_at.endswith("Z")


def test_recorded_sacct_output_gives_final_states_and_exit_codes() -> None:
    jobs = {j.job_id: j for j in parse_jobs((DATA / "sacct-finished.json").read_text(), "sacct")}
    assert jobs["17"].state == "COMPLETED" and jobs["17"].exit_code == 0
    assert phase_of(jobs["18"].state) == RunPhase.CANCELLED
    assert jobs["17"].comment.startswith("trainform:trainform:TrainingJob/alpha/bigram:")


def test_reason_codes_read_as_sentences() -> None:
    assert "project's GPU quota" in readable_reason("AssocGrpGRES")
    assert readable_reason("AssocGrpGRES").endswith("(AssocGrpGRES)")
    assert readable_reason("None") == ""
    assert readable_reason("SomethingNew") == "SomethingNew"


def test_node_lines_parse_with_spaces_in_values() -> None:
    nodes = parse_nodes(NODE_LINE)
    node = nodes["vm"]
    assert (node.cpus, node.memory_mib, node.gpus(), node.features) == (8, 8192, ("", 4), ())
    assert [[n.name for n in group] for group in group_pools(nodes)] == [["vm"]]


def test_typed_gres_gives_the_gpu_type() -> None:
    node = parse_nodes(NODE_LINE.replace("Gres=gpu:4", "Gres=gpu:a100:2(S:0),gpu:a100:2"))["vm"]
    assert node.gpus() == ("a100", 4)


def queue_spec(**changes: object) -> dict:
    spec = {
        "pools": [{"pool": "gpus", "nominalQuota": {"gpu": "4", "cpu": "8"}}],
        "defaultPriority": 100,
        "preemption": {"withinQueue": "Never", "reclaimWithinCohort": "Never"},
        "maxRuntime": "2h",
        "stopPolicy": "None",
    }
    spec.update(changes)
    return spec


def test_queue_tres_adds_borrowing_and_drops_unbounded_resources() -> None:
    pools = [
        {"pool": "a", "nominalQuota": {"gpu": "4", "cpu": "8"}, "borrowingLimit": {"gpu": "2"}}
    ]
    assert mapping.queue_tres(queue_spec(pools=pools, cohort="c")) == {"gpu": "6", "cpu": "8"}
    unbounded = [{"pool": "a", "nominalQuota": {"gpu": "4"}}]
    assert mapping.queue_tres(queue_spec(pools=unbounded, cohort="c")) == {}


def test_a_queue_declares_only_what_its_spec_says() -> None:
    spec = queue_spec(slurm={"partition": {"PriorityTier": "3"}, "qos": {"MaxWall": "1440"}})
    partition = settings.queue_partition(spec, False, "q")
    assert partition == {"MaxTime": "120", "State": "UP", "QOS": "q", "PriorityTier": "3"}
    adopted = settings.queue_partition(queue_spec(maxRuntime=None), True, "q")
    assert adopted == {"State": "UP"}  # no QOS, no PriorityTier, no DefMemPerGPU invented
    qos = settings.queue_qos(spec, True, "marker")
    assert qos == {
        "Priority": "100",
        "GrpTRES": "cpu=8,gres/gpu=4",
        "PreemptMode": "cluster",
        "MaxWall": "1440",
    }


@pytest.mark.parametrize(
    ("key", "one", "other"),
    [
        pytest.param("MaxWall", "1440", "1-00:00:00", id="minutes-and-days"),
        pytest.param("GrpTRES", "cpu=4,mem=4G", "mem=4096M,cpu=4", id="tres-units-order"),
        pytest.param("AllowAccounts", "b,a", "a,b", id="list-order"),
        pytest.param("PreemptMode", "REQUEUE", "requeue", id="mode-case"),
        pytest.param("MaxTime", "UNLIMITED", "", id="unlimited-is-unset"),
    ],
)
def test_two_spellings_of_one_value_are_the_same(key: str, one: str, other: str) -> None:
    assert settings.same(key, one, other)
    assert settings.differing({key: one}, {key: other}) == {}


def test_a_tres_the_spec_drops_is_cleared_and_an_empty_value_clears() -> None:
    assert settings.assignments({"GrpTRES": "cpu=4"}, {"GrpTRES": "cpu=8,gres/gpu=2"}) == [
        "GrpTRES=cpu=4,gres/gpu=-1"
    ]
    assert settings.assignments({"MaxWall": ""}, {"MaxWall": "1-00:00:00"}) == ["MaxWall=-1"]


def test_quota_limits_land_on_the_account_and_read_back() -> None:
    limits = settings.quota_account_limits({"gpu": "2", "runningJobs": 3})
    assert limits == {"GrpTRES": "gres/gpu=2", "GrpJobs": "3"}  # per project: GrpJobs
    back = mapping.quota_from_association("gres/gpu=2", "3", "01:00:00")
    assert back == {"gpu": "2", "runningJobs": 3, "maxWallTime": "1h"}


def launch(**changes: object) -> JobLaunch:
    values: dict = dict(
        address="TrainingJob/alpha/bigram",
        run_id="r-1",
        attempt=2,
        kind="train",
        project="alpha",
        queue="train",
        priority=0,
        command=["python3", "train.py"],
        code_dir=None,
        parameters={"steps": 3},
        env={},
        datasets=[],
        cpu="1.5",
        memory=str(300 * 2**20),
        gpus=2,
        nodes=1,
        checkpoint_interval=60,
        max_runtime=1800,
    )
    values.update(changes)
    return JobLaunch(**values)


def test_sbatch_argv_carries_ownership_requeue_and_checkpoint_signal(tmp_path: Path) -> None:
    jobs = SlurmJobs(SlurmCommands(), tmp_path, tmp_path, "trainform")
    folder = tmp_path / "attempt"
    folder.mkdir()
    argv = jobs._sbatch(launch(), folder, comment_of("trainform", launch()), folder / "l.json")
    assert argv[0] == "sbatch" and argv[-1] == str(folder / "job.sh")
    for expected in (
        "--account=alpha",
        "--partition=train",
        "--qos=train",
        "--requeue",
        "--cpus-per-task=2",
        "--mem=300M",
        "--gres=gpu:2",
        "--time=30",
        "--signal=B:USR1@60",
        "--comment=trainform:trainform:TrainingJob/alpha/bigram:r-1:train::2",
    ):
        assert expected in argv
    script = (folder / "job.sh").read_text()
    assert "exec " in script and "-m trainform.providers.slurm.runner" in script
    assert signal_seconds(launch(max_runtime=None)) is None


def test_a_job_account_slurm_could_not_hold_is_refused(tmp_path: Path) -> None:
    jobs = SlurmJobs(SlurmCommands(), tmp_path, tmp_path, "trainform")
    with pytest.raises(PermanentProviderError):
        jobs._sbatch(launch(project="x;y"), tmp_path, "c", tmp_path / "l.json")


def fake_program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def test_unreachable_controller_is_retried_then_transient(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    fake_program(
        tmp_path,
        "squeue",
        f"echo x >> {counter}\n"
        'echo "squeue: error: Unable to contact slurm controller" >&2; exit 1',
    )
    commands = SlurmCommands(str(tmp_path), attempts=3, backoff=0.01)
    with pytest.raises(TransientProviderError, match="Unable to contact"):
        commands.run(["squeue", "--json"])
    assert len(counter.read_text().split()) == 3


def test_other_failures_are_permanent_and_carry_slurm_words(tmp_path: Path) -> None:
    fake_program(tmp_path, "sbatch", 'echo "sbatch: error: Invalid qos specification" >&2; exit 1')
    commands = SlurmCommands(str(tmp_path), attempts=3, backoff=0.01)
    with pytest.raises(PermanentProviderError, match="Invalid qos specification"):
        commands.run(["sbatch", "job.sh"])


def test_commands_are_argv_lists_only() -> None:
    with pytest.raises(TypeError):
        SlurmCommands().run("squeue --json")  # type: ignore[arg-type]


def test_recorded_json_files_are_slurm_22_05() -> None:
    meta = json.loads((DATA / "sacct-finished.json").read_text())["meta"]
    assert meta["Slurm"]["release"].startswith("22.05")


SHADOWING = [  # (association limits, QOS settings, limits reported as shadowed)
    pytest.param({"GrpTRES": "gres/gpu=1"}, {"GrpTRES": "cpu=8,gres/gpu=4"}, ["GrpTRES gres/gpu"],
                 id="grp-tres-same-tres"),
    pytest.param({"GrpTRES": "mem=1G"}, {"GrpTRES": "cpu=8,gres/gpu=4"}, [], id="other-tres"),
    pytest.param({"MaxJobs": "2"}, {"MaxJobsPerUser": "5"}, ["MaxJobs"], id="max-jobs-per-user"),
    pytest.param({"MaxWall": "60"}, {"MaxWall": "1-00:00:00"}, ["MaxWall"], id="max-wall"),
    pytest.param({"GrpTRESMins": "cpu=100"}, {"GrpTRESMins": "cpu=10"}, ["GrpTRESMins cpu"],
                 id="grp-tres-mins"),
    pytest.param({"GrpJobs": ""}, {"GrpJobs": "5"}, [], id="unset-limit-hides-nothing"),
    pytest.param({"QOS": "normal"}, {"GrpJobs": "5"}, [], id="qos-list-is-no-limit"),
]  # fmt: skip


@pytest.mark.parametrize(("limits", "qos_settings", "hidden"), SHADOWING)
def test_a_qos_limit_shadows_the_same_association_limit(
    limits: dict[str, str], qos_settings: dict[str, str], hidden: list[str]
) -> None:
    from trainform.providers.slurm.accounting import Qos
    from trainform.providers.slurm.shadowing import findings, shadowed

    qos = Qos("q", "", 0, "", "", "", "", qos_settings)

    assert shadowed(limits, qos) == hidden
    found = findings("association of user u in account a on partition p", limits, ["q"],
                     {"q": qos})  # fmt: skip
    assert [f.kind for f in found] == (["limit-shadowed"] if hidden else [])
    assert all(f.warning and f.evidence["limits"] == hidden for f in found)


def _attempt(root: Path, job: str, job_id: str) -> str:
    address = f"TrainingJob/alpha/{job}"
    folder = root / "runs" / "alpha" / job / "r-1" / "attempts" / "1"
    folder.mkdir(parents=True)
    env = {
        "TRAINFORM_OUTPUT_DIR": str(folder / "output"),
        "TRAINFORM_PROGRESS_FILE": str(folder / "progress.json"),
    }
    launch = {
        "address": address,
        "manager": "trainform",
        "run_id": "r-1",
        "attempt": 1,
        "kind": "train",
        "env": env,
        "checkpoint_dir": str(folder / "checkpoints"),
    }
    (folder / "launch.json").write_text(json.dumps(launch))
    (folder / "submission.json").write_text(json.dumps({"job_id": job_id}))
    return address


def test_runs_of_many_jobs_cost_one_squeue_and_one_sacct(tmp_path: Path) -> None:
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for name, data in (("squeue", "squeue-pending.json"), ("sacct", "sacct-finished.json")):
        fake_program(bin_dir, name, f"echo {name} >> {calls}\ncat {DATA / data}")
    jobs = SlurmJobs(SlurmCommands(str(bin_dir)), root, tmp_path, "trainform")
    addresses = [_attempt(root, f"job-{i}", i) for i in ("19", "20", "17", "99")]

    runs = jobs.runs_of(addresses)

    assert calls.read_text().split() == ["squeue", "sacct"]
    phases = [runs[a][0].attempts[0].phase for a in addresses]
    assert phases == [RunPhase.RUNNING, RunPhase.QUEUED, RunPhase.SUCCEEDED, RunPhase.FAILED]
    assert "AssocGrpGRES" in runs[addresses[1]][0].attempts[0].reason
