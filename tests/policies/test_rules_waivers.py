"""User rules in CEL, waivers and their expiry, and reading the trusted policy folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from trainform.policies.findings import Severity
from trainform.policies.trusted import PolicyConfigError, load_trusted
from trainform.specs import load_specs

from tests.policies.support import POOL, evaluate, folder, of, queue

RULES = """\
apiVersion: trainform/v1
kind: PolicyConfig
rules:
  - id: queue-owner-label
    name: Queues name an owner
    severity: warn
    kinds: [Queue]
    violation: '!("owner" in resource.metadata.labels)'
    message: "queue {name} has no owner label"
  - id: small-gpu-quota
    kinds: [Queue]
    condition: 'resource.spec.pools.all(p, int(p.nominalQuota.gpu) <= params.max)'
    messageExpression: '"queue " + resource.name + " exceeds " + string(params.max) + " GPUs"'
    params: {max: 8}
    field: spec.pools
"""


def platform(tmp_path: Path, gpu: int = 8) -> Path:
    return folder(tmp_path / "specs", {"pool.yaml": POOL, "q.yaml": queue("team-a", gpu)})


def trusted_folder(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trusted"
    path.mkdir(exist_ok=True)
    (path / "policies.yaml").write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, specs_root: Path) -> object:
    return load_trusted(trusted_folder(tmp_path, text), load_specs(specs_root).config)


def test_rules_report_violations_with_messages(tmp_path: Path) -> None:
    root = platform(tmp_path, gpu=12)
    report = evaluate(root, load(tmp_path, RULES, root))  # type: ignore[arg-type]
    (owner,) = of(report, "queue-owner-label")
    assert owner.severity is Severity.WARN
    assert owner.message == "queue team-a has no owner label"
    assert owner.location.startswith("q.yaml:1:")
    (quota,) = of(report, "small-gpu-quota")
    assert quota.severity is Severity.DENY and report.denied
    assert quota.message == "queue team-a exceeds 8 GPUs"
    assert (quota.field, quota.location) == ("spec.pools", "q.yaml:6:5")


def test_rules_pass_compliant_resources(tmp_path: Path) -> None:
    root = platform(tmp_path, gpu=8)
    report = evaluate(root, load(tmp_path, RULES, root))  # type: ignore[arg-type]
    assert of(report, "small-gpu-quota") == []


def test_a_rule_that_errors_fails_closed(tmp_path: Path) -> None:
    text = RULES + "  - {id: broken, kinds: [Queue], violation: 'resource.spec.nothing > 1'}\n"
    root = platform(tmp_path)
    (finding,) = of(evaluate(root, load(tmp_path, text, root)), "broken")  # type: ignore[arg-type]
    assert finding.severity is Severity.DENY
    assert finding.message.startswith("rule could not be evaluated:")


def test_cel_cannot_reach_python(tmp_path: Path) -> None:
    text = "rules:\n  - {id: escape, violation: 'resource.__class__.__mro__ != null'}\n"
    root = platform(tmp_path)
    report = evaluate(root, load(tmp_path, text, root))  # type: ignore[arg-type]
    assert all(f.message.startswith("rule could not be evaluated") for f in of(report, "escape"))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param("rules:\n  - {id: bad, violation: '1 +'}\n", "policies.yaml:2:5", id="cel"),
        pytest.param(
            "rules:\n  - {id: both, violation: 'true', condition: 'true'}\n",
            "needs exactly one of",
            id="both",
        ),
        pytest.param("disabled: [pool-capacty]\n", "did you mean `pool-capacity`", id="typo"),
        pytest.param(
            "settings:\n  quota-cut: {maxShar: 0.5}\n", "has no setting `maxShar`", id="param"
        ),
        pytest.param(
            "waivers:\n  - {policy: x, address: y, reason: z, expires: someday}\n",
            "policies.yaml:2:",
            id="date",
        ),
    ],
)
def test_mistakes_in_the_policy_file_are_errors_with_location(
    tmp_path: Path, text: str, error: str
) -> None:
    root = platform(tmp_path)
    with pytest.raises(PolicyConfigError, match=error.replace("`", ".").replace("(", ".")):
        load(tmp_path, text, root)


def test_a_valid_waiver_downgrades_a_deny_and_an_expired_one_is_reported(tmp_path: Path) -> None:
    root = platform(tmp_path, gpu=24)
    text = """\
waivers:
  - policy: pool-capacity
    address: Queue/team-*
    reason: new nodes arrive next week
    expires: 2026-06-01
  - policy: image-pinned
    address: Image/old
    reason: legacy
    expires: 2026-05-31
"""
    report = evaluate(root, load(tmp_path, text, root))  # type: ignore[arg-type]
    (capacity,) = of(report, "pool-capacity")
    assert capacity.severity is Severity.WARN
    assert capacity.waived == "new nodes arrive next week"
    assert not report.denied
    (expired,) = of(report, "waiver-expired")
    assert expired.location == f"{tmp_path / 'trusted' / 'policies.yaml'}:6:5"
    assert "expired on 2026-05-31" in expired.message
    assert report.counts() == {"deny": 0, "warn": 1, "waived": 1}


def test_an_expired_waiver_waives_nothing(tmp_path: Path) -> None:
    root = platform(tmp_path, gpu=24)
    text = """\
settings:
  waiver-expired: {severity: deny}
waivers:
  - {policy: pool-capacity, address: "Queue/*", reason: temporary, expires: 2026-01-01}
"""
    report = evaluate(root, load(tmp_path, text, root))  # type: ignore[arg-type]
    assert [f.severity for f in of(report, "pool-capacity")] == [Severity.DENY]
    assert [f.severity for f in of(report, "waiver-expired")] == [Severity.DENY]


def test_without_a_trusted_folder_trainform_yaml_settings_apply(tmp_path: Path) -> None:
    root = platform(tmp_path, gpu=24)
    config = root / "trainform.yaml"
    config.write_text(
        config.read_text() + "policies:\n  settings:\n    pool-capacity: {severity: warn}\n"
    )
    report = evaluate(root)
    assert [f.severity for f in of(report, "pool-capacity")] == [Severity.WARN]


def test_a_trusted_folder_without_policies_yaml_means_defaults(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    trusted = load_trusted(empty, load_specs(platform(tmp_path)).config)
    assert (trusted.settings, trusted.rules, trusted.waivers) == ({}, [], [])
    with pytest.raises(PolicyConfigError, match="is not a folder"):
        load_trusted(tmp_path / "missing", load_specs(platform(tmp_path)).config)


def test_report_json_is_stable(tmp_path: Path) -> None:
    root = platform(tmp_path, gpu=24)
    first, second = evaluate(root).to_json(), evaluate(root).to_json()
    assert first == second
    assert first["denied"] is True
    assert set(first["findings"][0]) == {
        "policy",
        "name",
        "severity",
        "address",
        "field",
        "location",
        "message",
        "waived",
        "fingerprint",
    }
    finding = evaluate(root).findings[0]
    assert dataclasses.replace(finding, location="x:1:1").fingerprint == finding.fingerprint
