"""The policy report carried inside a saved plan, so `apply FILE` honours it.

`trainform plan -out FILE` writes the plan as `Plan.to_file_bytes` does, plus a `policies`
key holding `PolicyReport.to_json()`. The plan's checksum covers every key (`Plan.from_file`
verifies it over the whole body), so the report cannot be edited without the plan being
refused. `apply FILE` reads the report back and refuses a plan whose policies denied.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from trainform.planner.plan_model import Plan
from trainform.planner.plan_signing import signed
from trainform.planner.state import canonical_json
from trainform.policies.engine import PolicyReport

POLICIES_KEY = "policies"


def relative_to_cwd(spec_root: Path) -> str | None:
    """The spec folder relative to the directory plan runs in (None when outside it):
    apply FILE finds the folder there again, in whichever checkout it runs."""
    try:
        return spec_root.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return None


def plan_file_bytes(plan: Plan, spec_root: Path, report: PolicyReport) -> bytes:
    # secret-looking job values stay masked in the file; apply FILE puts them back from
    # the specs, once it has proven they are the ones planned (planner.saved_plans)
    plan_json = plan.to_json()
    body = signed(
        {
            **plan_json,
            "specRoot": str(spec_root),
            "specRootRelative": relative_to_cwd(spec_root),
            "stateLocation": plan.state_location,
            "stateBinding": plan.state_binding,
            POLICIES_KEY: report.to_json(),
        }
    )
    checksum = "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()
    return json.dumps({**body, "checksum": checksum}, indent=2).encode() + b"\n"


def saved_policy_report(path: str) -> dict[str, Any] | None:
    """The policy report of a saved plan (call after `Plan.from_file` verified it)."""
    data = json.loads(Path(path).read_bytes())
    report = data.get(POLICIES_KEY)
    return report if isinstance(report, dict) else None
