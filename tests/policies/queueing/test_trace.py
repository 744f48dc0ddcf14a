"""Reading traces: CSV, JSONL and sacct JSON; errors name file:line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainform.policies.queueing import TraceError, TraceJob, read_sacct, read_trace

from tests.helpers import REPO

HEADER = "id,submit,project,queue,gpus,duration,priority\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_reads_seconds_and_durations_sorted_by_submit(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "trace.csv",
        HEADER + "b,5m,team-a,q,8,2h,10\n# a comment\na,90,team-b,q,1,90s,\n",
    )
    assert read_trace(path) == [
        TraceJob("a", 90.0, "team-b", "q", 1, 90.0, None),
        TraceJob("b", 300.0, "team-a", "q", 8, 7200.0, 10),
    ]


def test_csv_user_and_qos_columns_are_read_lowercased(tmp_path: Path) -> None:
    path = write(
        tmp_path, "t.csv", "submit,project,queue,gpus,duration,user,qos\n0,p,q,1,1h,Bob,\n"
    )
    assert read_trace(path) == [TraceJob("job-1", 0.0, "p", "q", 1, 3600.0, user="bob")]


def test_csv_without_id_column_numbers_the_jobs(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", "submit,project,queue,gpus,duration\n0,p,q,1,1h30m\n")
    assert read_trace(path) == [TraceJob("job-1", 0.0, "p", "q", 1, 5400.0, None)]


def test_jsonl_reads_numbers_and_strings(tmp_path: Path) -> None:
    rows = [
        {"id": "x", "submit": 1.5, "project": "p", "queue": "q", "gpus": 4, "duration": "1d"},
        {"submit": "0", "project": "p", "queue": "q", "gpus": "2", "duration": 10, "priority": 3},
    ]
    path = write(tmp_path, "t.jsonl", "\n".join(json.dumps(row) for row in rows) + "\n")
    assert read_trace(path) == [
        TraceJob("job-2", 0.0, "p", "q", 2, 10.0, 3),
        TraceJob("x", 1.5, "p", "q", 4, 86400.0, None),
    ]


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "message"),
    [
        pytest.param("t.csv", HEADER + "a,0,p,q,x,1,0\n", 2, "gpus", "whole number", id="gpus"),
        pytest.param("t.csv", HEADER + "a,0,p,q,0,1,0\n", 2, "gpus", "at least 1", id="zero"),
        pytest.param("t.csv", HEADER + "a,soon,p,q,1,1,0\n", 2, "submit", "90s", id="submit"),
        pytest.param("t.csv", HEADER + "a,0,p,q,1,0,0\n", 2, "duration", "greater", id="dur"),
        pytest.param("t.csv", HEADER + "a,0,,q,1,1,0\n", 2, "project", "missing", id="empty"),
        pytest.param("t.csv", HEADER + "a,0,p,q,1\n", 2, "", "7 columns", id="short-row"),
        pytest.param("t.csv", "submit,project,queue,gpus\n", 1, "duration", "missing", id="col"),
        pytest.param("t.csv", "submit,team,queue,gpus,duration\n", 1, "team", "unknown", id="unk"),
        pytest.param(
            "t.csv", HEADER + "a,0,p,q,1,1,0\n\na,1,p,q,1,1,0\n", 4, "id", "line 2", id="dup"
        ),
        pytest.param("t.jsonl", '{"submit": 0}\n{oops\n', 1, "project", "missing", id="json-m"),
        pytest.param("t.jsonl", "\n{oops\n", 2, "", "invalid JSON", id="json-bad"),
        pytest.param("t.jsonl", "[1]\n", 1, "", "JSON object", id="json-list"),
    ],
)
def test_errors_name_file_line_and_field(
    tmp_path: Path, name: str, text: str, line: int, field: str, message: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(TraceError) as raised:
        read_trace(path)
    error = raised.value
    assert (error.file, error.line, error.field) == (str(path), line, field)
    assert message in str(error)
    assert str(error).startswith(f"cannot read trace {path}:{line}")


def test_a_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot open"):
        read_trace(tmp_path / "nope.csv")


def sacct_job(job_id: int, **overrides: object) -> dict[str, object]:
    job: dict[str, object] = {
        "job_id": job_id,
        "account": "alignment",
        "partition": "hpc-batch,hpc-debug",
        "priority": {"set": True, "infinite": False, "number": 400},
        "time": {"submission": 1_700_000_000 + job_id * 60, "elapsed": 3600},
        "tres": {
            "requested": [{"type": "gres", "name": "gpu", "count": 8}],
            "allocated": [
                {"type": "cpu", "name": "", "count": 64},
                {"type": "gres", "name": "gpu", "count": 8},
                {"type": "gres", "name": "gpu:a100", "count": 8},
            ],
        },
    }
    job.update(overrides)
    return job


def test_sacct_json_maps_account_partition_gpus_and_times() -> None:
    document = {
        "jobs": [
            sacct_job(2, user="Alice", qos="train"),
            sacct_job(
                1,
                priority=100,
                tres={"requested": [{"type": "gres", "name": "gpu:h100", "count": 2}]},
            ),
            sacct_job(3, tres={"allocated": [{"type": "cpu", "count": 4}]}),  # no GPU
            sacct_job(4, time={"submission": 1_700_000_300, "elapsed": 0}),  # never ran
        ]
    }
    # Slurm's job priority is another scale: the queue's priority from the specs applies.
    assert read_sacct(json.dumps(document)) == [
        TraceJob("1", 0.0, "alignment", "hpc-batch", 2, 3600.0, None),
        TraceJob("2", 60.0, "alignment", "hpc-batch", 8, 3600.0, None, user="alice", qos="train"),
    ]


def test_sacct_requeued_runs_fold_into_one_job_with_its_first_wait() -> None:
    base = 1_700_000_000
    preempted = sacct_job(
        7, time={"submission": base, "start": base + 30, "elapsed": 20, "limit": 60}
    )
    rerun = sacct_job(
        7, time={"submission": base + 50, "start": base + 171, "elapsed": 3000, "limit": 60}
    )
    other = sacct_job(8, time={"submission": base + 10, "start": base + 10, "elapsed": 5})
    (job, second) = read_sacct(json.dumps({"jobs": [preempted, rerun, other]}))
    assert job == TraceJob(
        "7", 0.0, "alignment", "hpc-batch", 8, 3000.0, None, limit=3600.0, actual_wait=30.0
    )
    assert (second.id, second.submit, second.actual_wait) == ("8", 10.0, 0.0)


def test_sacct_that_is_not_sacct_json_is_a_trace_error() -> None:
    with pytest.raises(TraceError, match="invalid JSON"):
        read_sacct("{")
    with pytest.raises(TraceError, match="jobs"):
        read_sacct('{"meta": {}}')
    with pytest.raises(TraceError, match="account"):
        read_sacct(json.dumps({"jobs": [sacct_job(1, account="")]}))
    with pytest.raises(TraceError, match="partition"):
        read_sacct(json.dumps({"jobs": [sacct_job(1, partition=None)]}))


def test_sacct_jobs_whose_partition_is_not_recorded_yet_are_skipped() -> None:
    document = {"jobs": [sacct_job(1), sacct_job(2, partition="")]}
    assert [job.id for job in read_sacct(json.dumps(document))] == ["1"]


def test_the_bundled_review_trace_reads() -> None:
    jobs = read_trace(REPO / "examples" / "review" / "trace.csv")
    assert len(jobs) == 2000
    assert {job.queue for job in jobs} == {"team-a", "team-b"}
