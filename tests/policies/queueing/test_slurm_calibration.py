"""Calibration: the Slurm model against the real Slurm test cluster (tests/services/slurm.py).

A seeded trace of 40 short jobs over two partitions of one 4-GPU node (PriorityTier 10 vs
1; QOS GPU limits 3 and 2, the latter replacing a 1-GPU association limit) runs for real,
without and with QOS preemption of the low partition by the high one, and is replayed by
`simulate_slurm` from what Slurm accounted (submission times, run times). Per queue, the
simulated p50 and p95 waits are within 25% or 15 s (whichever is larger) of the real ones,
and the start order agrees (Kendall tau-b >= 0.85). The test prints the table. Tolerances
and the two measured properties of the cluster (release delay, bf_interval) are described
in docs/simulation.md.
"""

from __future__ import annotations

import pytest

from tests.policies.queueing.slurm_calibration import (
    compare,
    make_trace,
    partitions,
    platform_of,
    run_on_cluster,
    simulate_run,
    table,
)
from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow

SEED, JOBS = 23, 40
SHARE, SECONDS, TAU = 0.25, 15.0, 0.85


@pytest.mark.parametrize("preemption", [False, True], ids=["no-preemption", "qos-preemption"])
def test_simulated_waits_and_start_order_match_the_real_cluster(
    slurm_cluster: SlurmCluster, preemption: bool
) -> None:
    trace = make_trace(SEED, JOBS)
    with partitions(slurm_cluster, preemption) as names:
        observed = run_on_cluster(slurm_cluster, trace, names)
    assert len(observed) == JOBS
    rows, tau = compare(observed, simulate_run(platform_of(slurm_cluster, preemption), observed))
    print("\n" + table(f"Slurm calibration, preemption={preemption}, seed {SEED}", rows, tau))
    assert {row.queue for row in rows} == {"hi", "lo"}
    for row in rows:
        assert row.within(SHARE, SECONDS), row
    assert tau >= TAU
