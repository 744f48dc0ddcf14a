"""`trainform review` of a pull request that deletes a team's Quota on Kubernetes: denied by
quota-cut as a cut to zero, and the simulation shows the team's jobs never admitted (no
Quota, no LocalQueue: the provider refuses its jobs, as Kueue would never admit them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.engine.support import run_trainform
from tests.policies.review.conftest import BUNDLED_TRACE
from tests.policies.review.fixture import CONFIG, POOL, commit, make_repository

KUBERNETES = "{name: k8s, type: kubernetes, connection: {context: review-test}}"


def test_deleting_a_teams_quota_is_denied_as_a_cut_with_its_simulated_effect(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    make_repository(repo)
    commit(
        repo,
        {
            "trainform.yaml": CONFIG.replace("{name: local, type: local}", KUBERNETES),
            "platform/pools.yaml": POOL.replace("provider: local", "provider: k8s"),
        },
        "the platform runs on Kubernetes",
    )
    commit(repo, {"teams/team-a/quota.yaml": None}, "team-a gives up its Quota")
    shutil.copyfile(BUNDLED_TRACE, tmp_path / "trace.csv")

    result = run_trainform(
        "review", "repo", "--base", "HEAD~1", "--head", "HEAD", "--trace", "trace.csv",
        "--format", "json", cwd=tmp_path,
    )  # fmt: skip

    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "deny"
    (finding,) = report["policies"]["findings"]
    assert (finding["policy"], finding["address"], finding["status"]) == (
        "quota-cut",
        "Quota/team-a/team-a",
        "new",
    )
    assert finding["location"] == "repo/teams/team-a/quota.yaml:1:1"  # where the base had it
    assert finding["message"].startswith(
        "the Quota is deleted, so gpu drops from 64 to 0 (100%), more than 25% of it (without "
        "a Quota the project has no LocalQueue for queue team-a"
    )
    team_a = report["simulation"]["projects"]["team-a"]
    assert team_a["base"]["never_admitted"] == 0
    assert team_a["head"]["never_admitted"] == team_a["base"]["count"] > 0
    assert report["simulation"]["projects"]["team-b"]["head"]["never_admitted"] == 0
