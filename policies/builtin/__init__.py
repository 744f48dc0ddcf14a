"""The built-in policies, in the order they run and are documented (docs/policies.md).

Ids are stable kebab-case names; settings, `disabled` lists and waivers refer to them.
"""

from __future__ import annotations

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.builtin.capacity import COHORT_BORROWING, COHORT_LENDING, POOL_CAPACITY
from trainform.policies.builtin.images import ALLOWED_REGISTRIES, IMAGE_PINNED
from trainform.policies.builtin.isolation import PROJECT_ISOLATION
from trainform.policies.builtin.priorities import PRIORITY_BOUNDS
from trainform.policies.builtin.quota_cut import QUOTA_CUT
from trainform.policies.builtin.releases import RELEASE_APPROVAL, RELEASE_GATES
from trainform.policies.builtin.secrets import SECRET_IN_SPEC
from trainform.policies.builtin.training import DATASET_PINNED, LONG_JOB_CHECKPOINT

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
        RELEASE_GATES,
        RELEASE_APPROVAL,
    )
}

__all__ = ["BUILTINS", "BuiltinPolicy", "Violation"]
