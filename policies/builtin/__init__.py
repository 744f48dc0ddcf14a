"""The built-in policies, in the order they run and are documented (docs/policies.md).

Ids are stable kebab-case names; settings, `disabled` lists and waivers refer to them.
"""

from __future__ import annotations

from policies.builtin.base import BuiltinPolicy, Violation
from policies.builtin.capacity import COHORT_BORROWING, COHORT_LENDING, POOL_CAPACITY
from policies.builtin.images import ALLOWED_REGISTRIES, IMAGE_PINNED
from policies.builtin.isolation import PROJECT_ISOLATION
from policies.builtin.priorities import PRIORITY_BOUNDS
from policies.builtin.quota_cut import QUOTA_CUT
from policies.builtin.secrets import SECRET_IN_SPEC
from policies.builtin.training import DATASET_PINNED, LONG_JOB_CHECKPOINT

BUILTINS: dict[str, BuiltinPolicy] = {
    policy.id: policy
    for policy in (
        IMAGE_PINNED,
        DATASET_PINNED,
        LONG_JOB_CHECKPOINT,
        POOL_CAPACITY,
        COHORT_LENDING,
        COHORT_BORROWING,
        PRIORITY_BOUNDS,
        ALLOWED_REGISTRIES,
        PROJECT_ISOLATION,
        QUOTA_CUT,
        SECRET_IN_SPEC,
    )
}

__all__ = ["BUILTINS", "BuiltinPolicy", "Violation"]
