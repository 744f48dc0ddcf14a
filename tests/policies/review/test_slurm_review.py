"""Review of a Slurm site as `trainform import` writes it: the semantic diff covers
`spec.slurm` (compared as Slurm reads it), and the simulation reads the same settings, so a
PR that doubles a QOS's GrpTRES is a queue-policy change with a simulated effect."""

from __future__ import annotations

import json
from pathlib import Path

from trainform.policies.review.semantic import diff_queue_policy
from trainform.specs import load_specs

from tests.engine.support import run_trainform
from tests.policies.queueing.test_slurm_specs import CONFIG, SITE
from tests.policies.review.fixture import commit, git


def folder(root: Path, text: str) -> Path:
    root.mkdir(parents=True)
    (root / "trainform.yaml").write_text(CONFIG, encoding="utf-8")
    (root / "site.yaml").write_text(text, encoding="utf-8")
    return root


def changes(tmp_path: Path, head: str) -> dict[str, dict[str, tuple[str | None, str | None]]]:
    base = load_specs(folder(tmp_path / "base", SITE.replace("GPUS", "4")))
    found = diff_queue_policy(base, load_specs(folder(tmp_path / "head", head)))
    return {c.address: {f.field: (f.old, f.new) for f in c.fields} for c in found}


def test_slurm_settings_are_queue_policy_compared_as_slurm_reads_them(tmp_path: Path) -> None:
    head = (
        SITE.replace("GPUS", "4")
        .replace("'cpu=64,gres/gpu=4'", "'gres/gpu=8,cpu=64'")
        .replace("Preempt: scavenge, ", "")
        .replace("PriorityTier: '5'", "PriorityTier: '20'")
        .replace("bob: {MaxJobs: '1'}", "bob: {MaxJobs: '1'}\n      carol: {MaxJobs: '3'}")
        .replace("MaxWall: ''", "MaxWall: '1440'")
    )
    assert changes(tmp_path, head) == {
        "Queue/gpu": {
            "slurm.qos.GrpTRES": ("cpu=64,gres/gpu=4", "gres/gpu=8,cpu=64"),
            "slurm.qos.Preempt": ("scavenge", None),
            "slurm.qos.MaxWall": ("'' (cleared)", "1440"),
        },
        "Queue/gpu-long": {"slurm.partition.PriorityTier": ("5", "20")},
        "Project/research": {
            "slurm.users[carol]": (None, "association"),
            "slurm.users[carol].MaxJobs": (None, "3"),
        },
    }


def test_respelled_slurm_values_are_no_change(tmp_path: Path) -> None:
    head = SITE.replace("GPUS", "4").replace("'cpu=64,gres/gpu=4'", "'gres/gpu=4,cpu=64'")
    head = head.replace("PreemptMode: cluster", "PreemptMode: CLUSTER")
    assert changes(tmp_path, head) == {}


TRACE = """\
id,submit,project,queue,gpus,duration,user
a1,0,research,gpu,2,600,alice
c1,10,research,gpu,2,600,carol
c2,20,research,gpu,2,600,dan
e1,30,research,gpu,2,600,erin
b1,40,research,gpu-long,1,300,bob
"""


def test_doubling_a_qos_grptres_reviews_as_a_change_with_a_simulated_effect(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"trainform.yaml": CONFIG, "site.yaml": SITE.replace("GPUS", "4")}, "import")
    commit(repo, {"site.yaml": SITE.replace("GPUS", "8")}, "twice the GPUs for train")
    (tmp_path / "trace.csv").write_text(TRACE, encoding="utf-8")
    result = run_trainform("review", "repo", "--base", "HEAD~1", "--head", "HEAD",
                           "--trace", "trace.csv", "--format", "json", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    [change] = report["changes"]
    assert (change["address"], change["fields"]) == (
        "Queue/gpu",
        [{"field": "slurm.qos.GrpTRES", "old": "cpu=64,gres/gpu=4", "new": "cpu=64,gres/gpu=8"}],
    )
    simulation = report["simulation"]
    assert simulation["base"]["never_admitted"] == [] == simulation["head"]["never_admitted"]
    gpu = simulation["queues"]["gpu"]
    # base: two 2-GPU jobs at a time (QOS train's 4 GPUs); head: all four at once
    assert (gpu["base"]["count"], gpu["base"]["max"], gpu["head"]["max"]) == (4, 580.0, 0.0)
