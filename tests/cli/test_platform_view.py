"""`status --platform` counts accelerators per type (A100 and H100 apart, never one GPU
number) and shows memory beside GPUs and CPUs: capacity and nominal quota from the specs,
use from the running attempts, each charged to its pool's accelerator type."""

from __future__ import annotations

import json
from decimal import Decimal

from trainform.cli.render.platform_text import render_platform_text
from trainform.planner.platform_view import (
    PlatformView,
    PoolView,
    QueueView,
    charge_running,
)
from trainform.providers.jobs import AccountedRun, AttemptStatus, RunPhase, RunStatus

from tests.helpers import REPO, run_cli

PLATFORM = REPO / "examples" / "platform"
GI = 2**30


def test_status_platform_of_examples_platform_lists_gpus_per_accelerator_type() -> None:
    done = run_cli("status", str(PLATFORM), "--platform")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    table = lines[lines.index("Accelerators:") + 1 : lines.index("Pools:")]
    assert [line.split() for line in table] == [
        ["type", "pools", "capacity", "nominal", "in", "use"],
        ["a100", "hpc-a100", "256", "256", "0"],
        ["nvidia-a100-80gb", "a100", "256", "224", "0"],
        ["nvidia-h100-80gb", "h100", "128", "128", "0"],
    ]
    # a queue over two pools names each type's share, and memory
    assert (
        "    nominal:  gpu 72 (nvidia-a100-80gb 64, nvidia-h100-80gb 8), cpu 920, "
        "memory 12200Gi" in lines
    )
    assert "    capacity: gpu 128 (nvidia-h100-80gb 128), cpu 3200, memory 28800Gi" in lines

    data = json.loads(run_cli("status", str(PLATFORM), "--platform", "--format", "json").stdout)
    assert data["formatVersion"] == 1
    eval_queue = next(q for q in data["queues"] if q["queue"] == "eval")
    assert eval_queue["nominal"] == {
        "gpu": 72,
        "cpu": 920,
        "memory": 12200 * GI,
        "gpuByType": {"nvidia-a100-80gb": 64, "nvidia-h100-80gb": 8},
    }
    h100 = next(p for p in data["pools"] if p["pool"] == "h100")
    assert h100["accelerator"] == "nvidia-h100-80gb"
    assert h100["capacity"]["memory"] == 16 * 1800 * GI


def _pools() -> dict[str, PoolView]:
    return {
        name: PoolView(name, "k8s", 2, {"gpu": Decimal(16), "gpu:" + kind: Decimal(16)}, kind)
        for name, kind in (("a100", "nvidia-a100-80gb"), ("h100", "nvidia-h100-80gb"))
    }


def _running(gpus: int, pool: str = "") -> tuple[AccountedRun, AttemptStatus]:
    attempt = AttemptStatus(1, RunPhase.RUNNING, gpus=gpus, cpus=8.0)
    run = AccountedRun("TrainingJob/p/j", "p", "mixed", RunStatus("r1", [attempt]), pool)
    return run, attempt


def test_a_running_attempt_is_charged_to_its_pools_accelerator_type() -> None:
    pools = _pools()
    mixed = QueueView("mixed", "k8s", ["a100", "h100"], {"gpu": Decimal(0)})
    single = QueueView("solo", "k8s", ["h100"], {"gpu": Decimal(0)})
    charge_running(*_running(8, pool="a100"), mixed, pools, Decimal(64 * GI))
    charge_running(*_running(4), single, pools, Decimal(32 * GI))
    # the provider does not say which of two pools of different types: not guessed
    charge_running(*_running(2), mixed, pools, Decimal(0))
    assert mixed.to_json()["inUse"]["gpuByType"] == {"nvidia-a100-80gb": 8, "unattributed": 2}
    assert mixed.to_json()["inUse"]["memory"] == 64 * GI
    assert pools["a100"].to_json()["inUse"]["gpuByType"] == {"nvidia-a100-80gb": 8}
    assert pools["h100"].to_json()["inUse"] == {
        "gpu": 4,
        "cpu": 8,
        "memory": 32 * GI,
        "gpuByType": {"nvidia-h100-80gb": 4},
    }
    text = render_platform_text(
        PlatformView(sorted(pools.values(), key=lambda p: p.name), [mixed, single], [])
    )
    assert "  nvidia-h100-80gb  h100         16        0       4" in text, text
    assert "    in use:   gpu 10 (nvidia-a100-80gb 8, unattributed 2), cpu 16, memory 64Gi" in text
    assert "  unattributed      -             0        0       2" in text
