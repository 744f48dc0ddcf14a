"""map_halves, both and alongside: work computed in a forked child, the same results as in
one process, and the parent computes what a failed child did not send.

The forking cases run in a fresh interpreter: the test process may run service threads,
and map_halves never forks a process with more than one thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from trainform.specs.split_work import alongside, can_split, map_halves

from tests.helpers import REPO, write_tree


def run_script(body: str) -> str:
    script = (
        "from trainform.specs.split_work import alongside, both, can_split, map_halves\n"
        + textwrap.dedent(body)
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_halves_come_back_in_order_from_a_child_process() -> None:
    out = run_script(
        """
        import os
        parent = os.getpid()
        parts = map_halves(lambda xs: ([x * 2 for x in xs], os.getpid()), list(range(5001)), 10)
        assert [x for part, _ in parts for x in part] == [x * 2 for x in range(5001)]
        assert parts[0][1] == parent and parts[1][1] != parent
        print("ok", len(parts))
        """
    )
    assert out.split() == ["ok", "2"]


def test_a_failing_child_leaves_the_parent_to_compute_its_half() -> None:
    out = run_script(
        """
        import os
        parent = os.getpid()
        def half(xs):
            if os.getpid() != parent:
                os._exit(3)  # the child dies without a result
            return sum(xs)
        print(map_halves(half, list(range(100)), 10))
        """
    )
    assert out.strip() == f"[{sum(range(50))}, {sum(range(50, 100))}]"


def test_an_exception_of_the_function_reaches_the_caller() -> None:
    out = run_script(
        """
        def boom(xs):
            raise ValueError("bad item")
        try:
            map_halves(boom, list(range(100)), 10)
        except ValueError as exc:
            print("raised", exc)
        """
    )
    assert out.strip() == "raised bad item"


def test_small_inputs_threads_and_the_switch_keep_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert map_halves(len, [1, 2, 3], minimum=10) == [3]
    assert not can_split(3, minimum=10)
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        assert not can_split(10_000, minimum=10)
    finally:
        stop.set()
        worker.join()
    monkeypatch.setenv("TRAINFORM_NO_FORK", "1")
    assert not can_split(10_000, minimum=10)


def test_a_side_job_rides_with_the_next_split_and_shrinks_the_childs_share() -> None:
    out = run_script(
        """
        import os
        parent = os.getpid()
        with alongside(lambda: ("side", os.getpid()), weight=0.4) as side:
            parts = map_halves(lambda xs: (len(xs), os.getpid()), list(range(1000)), 10)
        value, where = side.result()
        assert value == "side" and where != parent
        assert parts[0] == (700, parent) and parts[1][0] == 300 and parts[1][1] != parent
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_a_side_job_no_split_carried_runs_in_the_parent_once() -> None:
    calls: list[int] = []
    with alongside(lambda: calls.append(1) or len(calls), weight=0.4) as side:
        assert map_halves(len, [1, 2, 3], minimum=10) == [3]
    assert side.result() == 1 and side.result() == 1
    assert calls == [1]
    # the next split, outside the block, carries nothing
    assert map_halves(len, list(range(20)), minimum=100) == [20]


def test_a_side_job_whose_child_failed_is_computed_by_the_parent() -> None:
    out = run_script(
        """
        import os
        parent = os.getpid()
        def side_job():
            if os.getpid() != parent:
                os._exit(3)
            return "parent"
        with alongside(side_job, weight=0.2) as side:
            parts = map_halves(sum, list(range(100)), 10)
        assert sum(parts) == sum(range(100)), parts
        print(side.result())
        """
    )
    assert out.strip() == "parent"


def test_both_runs_the_second_job_in_a_child_and_the_first_here() -> None:
    out = run_script(
        """
        import os
        parent = os.getpid()
        seen = []
        mine, theirs = both(lambda: seen.append(1) or os.getpid(), lambda: os.getpid(), 5000)
        assert mine == parent and theirs != parent and seen == [1]
        small = both(lambda: os.getpid(), lambda: os.getpid(), 10)
        assert small == (parent, parent)
        def dies():
            if os.getpid() != parent:
                os._exit(3)
            return "again"
        assert both(lambda: 1, dies, 5000) == (1, "again")
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_an_error_in_the_parent_stops_and_reaps_the_child() -> None:
    out = run_script(
        """
        import os, time
        def slow():
            time.sleep(30)
            return 1
        def boom():
            raise KeyError("first")
        started = time.monotonic()
        try:
            both(boom, slow, 5000)
        except KeyError:
            pass
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            print("reaped", time.monotonic() - started < 10)
        """
    )
    assert out.strip() == "reaped True"


LOAD_BOTH_WAYS = """
    import json, os, sys
    import trainform.specs.loader as loader
    from trainform.specs.errors import SpecLoadError
    loader.SPLIT_BYTES = 1
    forks = []
    real_fork = os.fork
    def counted_fork():
        forks.append(1)
        return real_fork()
    os.fork = counted_fork
    def outcome(folder):
        try:
            specs = loader.load_specs(folder)
        except SpecLoadError as exc:
            return ["error", [str(d) for d in exc.diagnostics]]
        resources = [
            [a, r.location.file, r.location.line, [d.address for d in r.dependencies]]
            for a, r in specs.resources.items()
        ]
        return ["ok", resources, [str(w) for w in specs.warnings], specs.files]
    print(json.dumps([outcome(sys.argv[1]), len(forks)]))
"""


def load_both_ways(folder: str) -> tuple[object, object, int]:
    """The load of `folder` with every split forced, and with none; and the forks made."""
    runs = []
    for switch in ("0", "1"):
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(LOAD_BOTH_WAYS), folder],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "TRAINFORM_NO_FORK": switch},
        )
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout))
    (split, forks), (serial, none) = runs
    assert none == 0
    return split, serial, forks


def test_a_load_parsed_on_two_cores_equals_the_serial_load(tmp_path: Path) -> None:
    split, serial, forks = load_both_ways(str(REPO / "examples" / "quickstart"))
    assert forks >= 1 and split == serial and split[0] == "ok"


def test_a_tag_in_the_childs_half_is_parsed_again_here_with_the_same_diagnostics(
    tmp_path: Path,
) -> None:
    files = {
        "trainform.yaml": "apiVersion: trainform.dev/v1\nkind: Config\nproviders: {}\n",
        "a.yaml": "apiVersion: trainform.dev/v1\nkind: Project\nmetadata: {name: a}\nspec: {}\n",
        "b.yaml": "apiVersion: trainform.dev/v1\nkind: Project\nmetadata: {name: b}\nspec: {}\n",
        "c.yaml": "apiVersion: trainform.dev/v1\nkind: Project\nmetadata: !odd {name: c}\n",
        "d.yaml": "apiVersion: trainform.dev/v1\nkind: Project\nmetadata: {name: 010}\n",
    }
    write_tree(tmp_path / "specs", files)
    split, serial, forks = load_both_ways(str(tmp_path / "specs"))
    assert forks >= 1 and split == serial and split[0] == "error"
    assert any("tag" in line for line in split[1]), split
