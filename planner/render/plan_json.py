"""Plans as JSON: the versioned format of docs/plan-format.md, with stable key order."""

from __future__ import annotations

import json

from planner.plan_model import Plan


def render_plan_json(plan: Plan) -> str:
    return json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n"
