"""The `secret-in-spec` policy: no credential written into a job's parameters, env or command.

A secret committed to Git is already leaked, whatever trainform does with it; the fix is a
reference to a secret the platform holds (an environment variable the runtime injects, a
Kubernetes secret, a Slurm environment file). Findings name the field and why the value
looks secret (`specs.secrets.secret_reason`), and never quote the value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.context import Path_, PolicyContext, field_path
from trainform.policies.findings import Severity
from trainform.specs.secrets import SENSITIVE_FIELDS, item_name, secret_reason


def _flagged(name: str, value: Any, path: Path_) -> Iterator[tuple[Path_, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flagged(str(key), item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _flagged(item_name(value, index, name), item, (*path, index))
    else:
        reason = secret_reason(name, value)
        if reason is not None:
            yield path, reason


def check_secrets(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    for subject in context.of_kind("TrainingJob", "EvalSuite"):
        for field in SENSITIVE_FIELDS:
            value = subject.spec.get(field)
            if not value:
                continue
            for path, reason in _flagged(field, value, ("spec", field)):
                where = field_path(path)
                yield Violation(
                    subject.address,
                    path,
                    f"{where} looks like a secret ({reason}); do not write credentials in "
                    "specs: reference a secret the platform holds instead (e.g. the name of "
                    "an environment variable the runtime sets), and rotate this one",
                    key=where,
                )


SECRET_IN_SPEC = BuiltinPolicy(
    id="secret-in-spec",
    name="No secrets in job specs",
    severity=Severity.DENY,
    kinds=("TrainingJob", "EvalSuite"),
    check=check_secrets,
    description="TrainingJob and EvalSuite parameters, env values and command arguments "
    "hold no secret-looking value (private keys, AWS keys, known token formats, JWTs, "
    "`password=` pairs, high-entropy tokens, or any value of a credential-named field).",
)
