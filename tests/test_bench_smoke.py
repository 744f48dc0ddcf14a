"""The benchmarks keep working: each one with a `--smoke` mode runs it here, small.

Smoke modes go through the same code paths as the real runs on smaller inputs and check
outcomes only (exit codes, diagnostics), never time: timing lives in the benchmarks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO


@pytest.mark.slow
@pytest.mark.parametrize(
    "script",
    [
        "bench_bounded.py",
        "bench_plan.py",
        "bench_simulate.py",
        "bench_status.py",
        "bench_validate.py",
    ],
)
def test_benchmark_smoke_mode_passes(script: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
