"""The run-event protocol end to end in one process: what trainform.runtime writes, the
reader (providers/run_events.py) sums back exactly; the reader survives any bytes (a torn
last line, garbage, lines of another version, values out of bounds) and stays bounded; the
writer does nothing without TRAINFORM_EVENTS_FILE, stops before the size cap, and imports
nothing but the standard library."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trainform.providers.run_events import (
    MAX_PHASES,
    events_path,
    read_events,
    summarize_events,
)
from trainform.runtime import protocol
from trainform.runtime.events import Recorder

from tests.helpers import REPO


class Clock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def recorded(tmp_path: Path, rank: int = 0) -> tuple[Path, Clock, Recorder]:
    clock = Clock()
    path = tmp_path / "attempt-1.events.jsonl"
    return path, clock, Recorder(str(path), rank, clock)


def train(recorder: Recorder, clock: Clock, steps: int, data: float, compute: float) -> None:
    with recorder.phase("setup"):
        clock.advance(3.0)
    for step in range(1, steps + 1):
        with recorder.phase("data_wait", step=step):
            clock.advance(data)
        with recorder.phase("compute", step=step):
            clock.advance(compute)
        if step % 5 == 0:
            with recorder.phase("checkpoint", step=step) as span:
                clock.advance(0.5)
                span.bytes = 1000
    with recorder.phase("eval"):
        clock.advance(2.0)
    recorder.close()


def test_what_the_helper_writes_the_reader_sums_back(tmp_path: Path) -> None:
    path, clock, recorder = recorded(tmp_path)
    clock.advance(1.0)
    train(recorder, clock, steps=10, data=1.0, compute=2.0)
    summary = read_events(path)
    assert summary is not None
    assert (summary["ranks"], summary["ignored"], summary["truncated"]) == (1, 0, False)
    assert summary["firstAt"] == 1001.0 and summary["lastStep"] == 10
    assert summary["phases"] == {
        "checkpoint": {"seconds": 1.0, "count": 2, "bytes": 2000},
        "compute": {"seconds": 20.0, "count": 10, "bytes": 0},
        "data_wait": {"seconds": 10.0, "count": 10, "bytes": 0},
        "eval": {"seconds": 2.0, "count": 1, "bytes": 0},
        "setup": {"seconds": 3.0, "count": 1, "bytes": 0},
    }
    assert summary["open"] == {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        assert record["v"] == protocol.FORMAT_VERSION and record["rank"] == 0


def test_per_step_phases_are_summed_into_few_lines(tmp_path: Path) -> None:
    path, clock, recorder = recorded(tmp_path)
    for step in range(1000):
        with recorder.phase("data_wait", step=step):
            clock.advance(0.001)
        with recorder.phase("compute", step=step):
            clock.advance(0.01)
    recorder.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 2 * 3  # every 5 s of 11 s, and the rest at close
    summary = summarize_events(path.read_bytes())
    assert summary["phases"]["compute"]["count"] == 1000
    assert summary["phases"]["compute"]["seconds"] == pytest.approx(10.0)


def test_a_nested_phase_is_not_counted_twice(tmp_path: Path) -> None:
    path, clock, recorder = recorded(tmp_path)
    with recorder.phase("compute"):
        clock.advance(2.0)
        with recorder.phase("checkpoint") as span:
            clock.advance(1.0)
            span.bytes = 7
    recorder.close()
    phases = summarize_events(path.read_bytes())["phases"]
    assert phases["compute"]["seconds"] == 2.0
    assert (phases["checkpoint"]["seconds"], phases["checkpoint"]["bytes"]) == (1.0, 7)


def test_a_phase_the_process_died_in_stays_open(tmp_path: Path) -> None:
    path, clock, recorder = recorded(tmp_path)
    with recorder.phase("setup"):
        clock.advance(1.0)
    span = recorder.phase("checkpoint", step=5)
    span.__enter__()
    clock.advance(4.0)  # killed here: no span line, no flush
    summary = read_events(path)
    assert summary is not None
    assert summary["open"] == {"checkpoint": {"since": 1001.0, "ranks": 1}}


def test_ranks_sharing_one_file_are_averaged_and_their_bytes_summed(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "events.jsonl"
    recorders = [Recorder(str(path), rank, clock) for rank in range(2)]
    for rank, recorder in enumerate(recorders):
        with recorder.phase("data_wait"):
            clock.advance(1.0 + 2.0 * rank)
        with recorder.phase("checkpoint") as span:
            span.bytes = 10
        recorder.close()
    summary = summarize_events(path.read_bytes())
    assert summary["ranks"] == 2
    assert summary["phases"]["data_wait"]["seconds"] == 2.0
    assert summary["phases"]["checkpoint"]["bytes"] == 20


def test_without_the_variable_nothing_is_written(tmp_path: Path) -> None:
    code = (
        "from trainform import runtime\n"
        "with runtime.phase('compute'): pass\n"
        "runtime.flush()\n"
        "print(runtime.recorder().enabled)\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != protocol.EVENTS_VARIABLE}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "False" and list(tmp_path.iterdir()) == []


def test_the_variable_names_the_file_and_exit_flushes(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    code = (
        "from trainform import runtime\n"
        "for step in range(3):\n"
        "    with runtime.phase('compute', step=step): pass\n"
    )
    environment = {**os.environ, protocol.EVENTS_VARIABLE: str(path), "RANK": "3"}
    subprocess.run([sys.executable, "-c", code], env=environment, check=True)
    [line] = path.read_text().splitlines()
    record = json.loads(line)
    assert (record["phase"], record["count"], record["rank"], record["step"]) == (
        "compute",
        3,
        3,
        2,
    )


def test_the_writer_stops_before_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("trainform.runtime.events.MAX_FILE_BYTES", 2000)
    path, clock, recorder = recorded(tmp_path)
    for step in range(100):
        with recorder.phase("checkpoint", step=step):
            clock.advance(0.1)
    assert path.stat().st_size <= 2000 and not recorder.enabled
    summary = summarize_events(path.read_bytes())
    assert summary["truncated"] is True and summary["ignored"] == 0


def test_a_write_that_fails_turns_the_recorder_off(tmp_path: Path) -> None:
    recorder = Recorder(str(tmp_path / "missing" / "events.jsonl"), 0, Clock())
    with recorder.phase("setup"):
        pass
    assert not recorder.enabled


def test_a_phase_name_outside_the_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match="phase name"):
        Recorder(None).phase("Data Wait")


def test_the_events_file_sits_beside_the_log() -> None:
    assert events_path("/r/logs/attempt-2.log") == Path("/r/logs/attempt-2.events.jsonl")
    assert read_events("/nonexistent/attempt-1.events.jsonl") is None


def test_a_torn_last_line_and_garbage_are_skipped_and_counted() -> None:
    good = b'{"v":1,"t":10.0,"event":"span","phase":"compute","seconds":2.0}\n'
    data = (
        good
        + b"not json\n"
        + b'{"v":2,"t":10.0,"event":"span","phase":"compute","seconds":1}\n'
        + b'{"v":1,"t":10.0,"event":"span","phase":"compute","seconds":-1}\n'
        + b'{"v":1,"t":10.0,"event":"span","phase":"Compute","seconds":1}\n'
        + b'{"v":1,"t":"x","event":"span","phase":"compute","seconds":1}\n'
        + b'{"v":1,"t":10.0,"event":"span","phase":"compute","seconds":1e999}\n'
        + b'{"v":1,"t":10.0,"event":"span","phase":"compute","seconds":1,"rank":true}\n'
        + b'{"v":1,"t":10.0,"event":"poke","phase":"compute"}\n'
        + b"[" * 100_000
        + b"\n"
        + good[:30]
    )
    summary = summarize_events(data)
    assert summary["records"] == 1 and summary["ignored"] == 10
    assert summary["phases"]["compute"]["seconds"] == 2.0


def test_the_summary_is_bounded_whatever_the_file_holds() -> None:
    lines = [
        json.dumps({"v": 1, "t": 5.0, "event": "span", "phase": f"p{n}", "seconds": 1})
        for n in range(MAX_PHASES + 10)
    ]
    summary = summarize_events("\n".join(lines).encode())
    assert len(summary["phases"]) == MAX_PHASES and summary["ignored"] == 10


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
RECORDS = st.fixed_dictionaries(
    {},
    optional={
        "v": st.sampled_from([1, 2, "1", None]),
        "t": st.one_of(st.floats(allow_nan=True), st.integers(), st.text(max_size=3)),
        "event": st.sampled_from(["start", "span", "truncated", "end", ""]),
        "phase": st.sampled_from(["compute", "data_wait", "x" * 40, "Bad", ""]) | st.text(),
        "seconds": st.floats(allow_nan=True, allow_infinity=True) | st.integers(),
        "rank": st.integers(-5, 5000) | st.booleans() | st.floats(),
        "bytes": st.integers(-10, 2**70) | JSON_VALUES,
        "count": st.integers(-10, 2**50) | JSON_VALUES,
        "since": st.floats(allow_nan=True) | JSON_VALUES,
        "step": st.integers(-3, 2**50) | JSON_VALUES,
    },
)


def _line(record: dict[str, object]) -> bytes:
    return json.dumps(record, allow_nan=True).encode()


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.one_of(RECORDS.map(_line), st.binary(max_size=60), JSON_VALUES.map(_line)),
        max_size=20,
    ),
    st.integers(0, 40),
)
def test_any_bytes_give_a_summary_and_never_raise(lines: list[bytes], torn: int) -> None:
    data = b"\n".join(lines)
    data = data[: len(data) - torn] if torn < len(data) else data
    summary = summarize_events(data)
    json.dumps(summary, allow_nan=False)  # plain, finite JSON
    assert summary["records"] + summary["ignored"] <= len(data.split(b"\n"))
    for entry in summary["phases"].values():
        assert entry["seconds"] >= 0 and entry["count"] >= 0 and entry["bytes"] >= 0


def test_the_runtime_layer_imports_the_standard_library_only() -> None:
    for path in sorted((REPO / "runtime").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                allowed = top in sys.stdlib_module_names or name.startswith("trainform.runtime")
                assert allowed or top == "__future__", f"{path.name}: imports {name}"
