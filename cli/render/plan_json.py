"""Plans as JSON: the versioned format of docs/plan-format.md, with stable key order.
Secrets masked (`Plan.to_json`) and the text redacted (`specs.secrets.redact`)."""

from __future__ import annotations

import json

from trainform.planner.plan_model import Plan
from trainform.specs.secrets import redact


def render_plan_json(plan: Plan) -> str:
    return redact(json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
