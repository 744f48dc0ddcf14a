"""map_halves: the second half computed in a forked child, same results as one process.

The forking cases run in a fresh interpreter: the test process may run service threads,
and map_halves never forks a process with more than one thread.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
from trainform.planner.split_work import can_split, map_halves


def run_script(body: str) -> str:
    script = "from trainform.planner.split_work import map_halves, can_split\n" + textwrap.dedent(
        body
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
