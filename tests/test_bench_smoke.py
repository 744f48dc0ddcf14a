"""The benchmarks keep working: every `bench/bench_*.py` runs here in its `--smoke` mode.

Smoke modes go through the same code paths as the real runs on smaller inputs and check
outcomes only (exit codes, diagnostics), never time: timing lives in the benchmarks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

BENCHMARKS = sorted(path.name for path in (REPO / "bench").glob("bench_*.py"))


def test_every_benchmark_has_a_smoke_mode() -> None:
    """A benchmark without one would not run in CI and could stop working unnoticed."""
    assert len(BENCHMARKS) >= 6
    for script in BENCHMARKS:
        assert '"--smoke"' in (REPO / "bench" / script).read_text(encoding="utf-8"), script


@pytest.mark.slow
@pytest.mark.parametrize("script", BENCHMARKS)
def test_benchmark_smoke_mode_passes(script: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
