"""The drill's evidence from run data alone (no processes): the breakdown a report shows,
with and without the job's run events, the metric comparison against the baseline, and
which environments count as production."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from trainform.planner.drill_evidence import condition_evidence, metrics_match
from trainform.specs.environments import is_production
from trainform.specs.models.config import RootConfig

NOW = datetime(2026, 5, 4, 9, 0, 10, tzinfo=UTC)
CONTEXT = {
    "address": "TrainingJob/p/j",
    "project": "p",
    "queue": "q",
    "inputs": {"command": ["python3", "train.py"], "rerun": 3},
    "tolerance": 1e-3,
}


def raw_run(events: dict[str, Any] | None, metric: float = 5.0) -> dict[str, Any]:
    started = datetime(2026, 5, 4, 9, 0, 0, tzinfo=UTC).timestamp()
    attempt = {
        "attempt": 1, "phase": "succeeded", "cause": "succeeded", "queue": "q", "cpus": 1.0,
        "submitted_at": "2026-05-04T09:00:00Z", "started_at": "2026-05-04T09:00:00Z",
        "ended_at": "2026-05-04T09:00:10Z",
        "events": None if events is None else {"firstAt": started + 1.0, **events},
    }  # fmt: skip
    return {
        "run_id": "r-1",
        "attempts": [attempt],
        "checkpoints": [],
        "evaluations": [{"suite": "s", "run_id": "r-1", "phase": "succeeded",
                         "metrics": {"perplexity": metric}}],
    }  # fmt: skip


def test_without_run_events_only_what_the_provider_knows_is_shown() -> None:
    evidence = condition_evidence("baseline", raw_run(None), CONTEXT, None, NOW)
    run = evidence["breakdown"]["run"]
    assert run["unaccounted"]["seconds"] == 10.0 and run["unaccounted"]["source"] == "provider"
    assert run["dataWait"] == {
        "seconds": None, "share": None, "source": "not recorded: the job emits no run events"
    }  # fmt: skip
    verdict = next(v for v in evidence["verdicts"] if v["item"] == "time breakdown")
    assert verdict["verdict"] == "needs more testing"


def test_with_run_events_the_data_wait_share_is_the_jobs_own() -> None:
    events = {"ranks": 1, "phases": {"data_wait": {"seconds": 6.0}, "compute": {"seconds": 3.0}}}
    evidence = condition_evidence("baseline", raw_run(events), CONTEXT, None, NOW)
    run = evidence["breakdown"]["run"]
    assert (run["dataWait"]["seconds"], run["dataWait"]["share"]) == (6.0, 0.6)
    assert run["setup"]["seconds"] == 1.0 and run["dataWait"]["source"] == "run events"
    verdict = next(v for v in evidence["verdicts"] if v["item"] == "time breakdown")
    assert verdict["verdict"] == "verified"


def test_a_condition_is_compared_with_the_baseline_identity_and_metric() -> None:
    baseline = condition_evidence("baseline", raw_run(None), CONTEXT, None, NOW)
    other = dict(CONTEXT, inputs={**CONTEXT["inputs"], "rerun": 4})
    failure = condition_evidence("failure", raw_run(None, 5.01), other, baseline, NOW)
    verdicts = {v["item"]: v for v in failure["verdicts"]}
    assert verdicts["same job identity"]["verdict"] == "verified"  # rerun is not identity
    assert verdicts["result matches the baseline"]["verdict"] == "needs more testing"
    assert "perplexity 5.01 vs baseline 5" in verdicts["result matches the baseline"]["evidence"]


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        pytest.param({"loss": 2.0005}, True, id="within-relative"),
        pytest.param({"loss": 2.01}, False, id="beyond"),
        pytest.param({}, None, id="no-metric"),
    ],
)
def test_metrics_match_within_the_tolerance(metrics: dict, expected: bool | None) -> None:
    assert metrics_match(metrics, {"loss": 2.0}, 1e-3)[0] is expected


def config(environments: dict[str, Any]) -> RootConfig:
    return RootConfig.model_validate({"apiVersion": "trainform/v1", "environments": environments})


@pytest.mark.parametrize(
    ("environments", "name", "expected"),
    [
        pytest.param({"prod": {}}, "prod", True, id="named-prod"),
        pytest.param({"live": {"production": True}}, "live", True, id="marked"),
        pytest.param({"prod": {"production": False}}, "prod", False, id="unmarked-prod"),
        pytest.param({"dev": {}}, "dev", False, id="dev"),
        pytest.param({"dev": {}, "prod": {}}, None, True, id="no-env-with-a-prod"),
        pytest.param({"dev": {}}, None, False, id="no-env-without-prod"),
    ],
)
def test_which_environments_are_production(
    environments: dict[str, Any], name: str | None, expected: bool
) -> None:
    assert is_production(config(environments), name) is expected
