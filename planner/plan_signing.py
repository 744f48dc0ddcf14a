"""Signing saved plans with the CI plan job's secret, so an edited plan cannot be applied.

A plan's sha256 checksum catches accidents, not intent: whoever edits a plan can recompute
it. With `TRAINFORM_PLAN_KEY` set (a secret only the plan and apply jobs hold), `plan -out`
adds `signature: hmac-sha256:<hex>` over the whole body, and `apply FILE` refuses a plan
whose signature is missing or wrong. Without the variable, plans are unsigned and a
signed plan is applied on its checksum alone.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

from trainform.planner.state import canonical_json

KEY_VARIABLE = "TRAINFORM_PLAN_KEY"
SIGNATURE = "signature"
PREFIX = "hmac-sha256:"


def _key() -> bytes | None:
    value = os.environ.get(KEY_VARIABLE, "")
    return value.encode("utf-8") if value else None


def _mac(key: bytes, body: dict[str, Any]) -> str:
    unsigned = {k: v for k, v in body.items() if k != SIGNATURE}
    text = canonical_json(unsigned).encode("utf-8")
    return PREFIX + hmac.new(key, text, hashlib.sha256).hexdigest()


def signed(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with a signature when TRAINFORM_PLAN_KEY is set; unchanged otherwise."""
    key = _key()
    return {**body, SIGNATURE: _mac(key, body)} if key else body


def signature_problem(body: dict[str, Any]) -> str | None:
    """Why `body` (checksum removed) may not be applied under TRAINFORM_PLAN_KEY, or None."""
    key = _key()
    if key is None:
        return None
    found = body.get(SIGNATURE)
    if not isinstance(found, str):
        return (
            f"{KEY_VARIABLE} is set, and the plan carries no signature: only a plan made by "
            f"`trainform plan -out` with the same {KEY_VARIABLE} may be applied"
        )
    if not hmac.compare_digest(found, _mac(key, body)):
        return (
            f"its signature does not match under {KEY_VARIABLE}: the plan was altered or "
            "signed with another key. Create a new plan"
        )
    return None
