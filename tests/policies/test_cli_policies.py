"""Policies through the installed `trainform` script: plan exits 3 on a deny with file:line,
a waiver in the trusted folder lets it pass with a warning, an expired waiver is reported,
apply refuses denied plans (DIR and saved FILE), and a policies.yaml inside the spec folder
under review is never read when --policies is given."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.engine.support import run_trainform
from tests.helpers import write_tree

CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local, connection: {root: .trainform}}
state: {backend: local, path: .trainform/state.json}
"""

# A CPU-only pool on this machine: its GPU capacity is 0, so any nominal GPU quota exceeds it.
PLATFORM = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: this-machine}
spec: {provider: local, nodes: 1, cpu: 1, memory: 1Gi}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: team-a}
spec:
  pools:
    - pool: this-machine
      nominalQuota: {gpu: 8, cpu: 1}
"""

WAIVER = """\
apiVersion: trainform/v1
kind: PolicyConfig
waivers:
  - policy: pool-capacity
    address: Queue/team-*
    reason: GPU nodes are being added (INFRA-42)
    expires: 2099-12-31
"""

EXPIRED = """\
waivers:
  - {policy: pool-capacity, address: Queue/team-a, reason: old exception, expires: 2020-01-01}
"""


def trainform(cwd: Path, *args: str, code: int) -> subprocess.CompletedProcess[str]:
    result = run_trainform(*args, cwd=cwd)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert result.returncode == code, (
        f"trainform {' '.join(args)} exited {result.returncode}:\n{output}"
    )
    return result


def make(tmp_path: Path, trusted: str | None = None) -> Path:
    write_tree(tmp_path / "specs", {"trainform.yaml": CONFIG, "platform.yaml": PLATFORM})
    if trusted is not None:
        write_tree(tmp_path / "trusted", {"policies.yaml": trusted})
    return tmp_path


def test_plan_is_denied_with_file_line_and_exits_3(tmp_path: Path) -> None:
    root = make(tmp_path)
    denied = trainform(root, "plan", "specs", "-out", "p.json", code=3)
    assert "deny[pool-capacity] Queue/team-a" in denied.stdout
    assert "--> platform.yaml:12:27" in denied.stdout
    assert "field:  spec.pools[0].nominalQuota.gpu" in denied.stdout
    assert "blocked by policy: 1 deny finding;" in denied.stderr

    as_json = trainform(root, "plan", "specs", "--format", "json", code=3)
    report = json.loads(as_json.stdout)["policies"]
    assert report["denied"] is True
    assert report["findings"][0]["location"] == "platform.yaml:12:27"

    markdown = trainform(root, "plan", "specs", "--format", "markdown", code=3)
    assert "#### Policy findings" in markdown.stdout
    assert "| deny | `pool-capacity` | `Queue/team-a` | `platform.yaml:12:27`" in markdown.stdout

    # The saved plan carries the denial: apply refuses it and changes nothing.
    refused = trainform(root, "apply", "p.json", code=3)
    assert "Nothing was applied" in refused.stderr
    assert not (root / "specs" / ".trainform" / "state.json").exists()
    refused = trainform(root, "apply", "specs", "--auto-approve", code=3)
    assert "creating" not in refused.stdout
    assert not (root / "specs" / ".trainform" / "state.json").exists()


def test_a_waiver_in_the_trusted_folder_passes_with_a_warning(tmp_path: Path) -> None:
    root = make(tmp_path, WAIVER)
    passed = trainform(
        root,
        "plan",
        "specs",
        "--policies",
        "trusted",
        "--detailed-exitcode",
        "-out",
        "p.json",
        code=2,
    )
    assert "warn (waived)[pool-capacity] Queue/team-a" in passed.stdout
    assert "waived: GPU nodes are being added (INFRA-42)" in passed.stdout
    assert "Nothing blocks apply." in passed.stdout
    shown = trainform(root, "show", "p.json", "--format", "json", code=0)
    assert json.loads(shown.stdout)["policies"]["summary"] == {"deny": 0, "warn": 0, "waived": 1}
    applied = trainform(root, "apply", "p.json", code=0)
    assert "Apply complete: 2 changes applied." in applied.stdout


def test_an_expired_waiver_is_reported_and_waives_nothing(tmp_path: Path) -> None:
    root = make(tmp_path, EXPIRED)
    denied = trainform(root, "plan", "specs", "--policies", "trusted", code=3)
    assert "warn[waiver-expired] Queue/team-a" in denied.stdout
    assert "--> trusted/policies.yaml:2:5" in denied.stdout
    assert "expired on 2020-01-01" in denied.stdout
    assert "deny[pool-capacity] Queue/team-a" in denied.stdout


def test_policies_in_the_spec_folder_under_review_are_ignored(tmp_path: Path) -> None:
    root = make(tmp_path, "disabled: [long-job-checkpoint]\n")
    # The change under review tries to waive its own violation and disable the policy.
    write_tree(root / "specs", {".policies/policies.yaml": WAIVER + "disabled: [pool-capacity]\n"})
    config = root / "specs" / "trainform.yaml"
    config.write_text(
        CONFIG + "policies:\n  path: .policies\n  disabled: [pool-capacity]\n", encoding="utf-8"
    )
    denied = trainform(root, "plan", "specs", "--policies", "trusted", code=3)
    assert "deny[pool-capacity] Queue/team-a" in denied.stdout
    assert "waived" not in denied.stdout.replace("0 waived", "")
    # Without --policies, the spec folder is trusted (a laptop): its settings apply.
    trainform(root, "plan", "specs", code=0)


def test_a_broken_trusted_policy_file_is_an_error(tmp_path: Path) -> None:
    root = make(tmp_path, "rules:\n  - {id: bad, violation: '1 +'}\n")
    broken = trainform(root, "plan", "specs", "--policies", "trusted", code=1)
    assert "trusted/policies.yaml:2:5: rule bad: not a valid CEL expression" in broken.stderr
