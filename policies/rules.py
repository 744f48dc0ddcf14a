"""User rules: per-resource checks written in CEL, the Common Expression Language.

CEL (cel-python, imported as `celpy`) is not Turing-complete, has no I/O, no imports and
no access to Python objects: an expression sees only the values bound to it. That is why
rules from a policy file can run in CI without running anyone's code.

A rule is evaluated once per resource of its `kinds` (all kinds when empty) with:
- `resource`: {kind, name, project, address, metadata: {name, project, labels,
  annotations}, spec}, the spec normalized as plans show it (quantities are canonical
  strings: `int(resource.spec.nodes)`, `double(q.gpu)`; durations are strings like `4h`);
- `params`: the rule's parameters;
- `previous`: the resource before the change (same shape as `resource`) when the change
  updates it (plan: as last applied; review: on the base branch), else `{}`, so a rule can
  compare (`has(previous.spec) && ...`) and plan and review agree on it.
`violation` is true when the resource violates the rule; `condition` (the alternative) is
what must hold. An expression that errors or returns a non-boolean is reported as a finding
of the rule (it fails closed), with the error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from trainform.policies.context import PolicyContext, Subject
from trainform.policies.findings import Severity

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]*)\}")


class RuleCompileError(Exception):
    """A rule's expression is not valid CEL."""


@dataclass
class UserRule:
    id: str
    name: str
    severity: Severity
    kinds: tuple[str, ...]
    expression: str
    must_hold: bool
    message: str = ""
    message_expression: str = ""
    params: dict[str, Any] = _field(default_factory=dict)
    field: str = ""
    location: str = ""
    _programs: tuple[Any, Any] | None = _field(default=None, repr=False)

    def compile(self) -> None:
        """Parse the expressions now, so a broken rule fails at load with its location."""
        import celpy

        environment = celpy.Environment()
        try:
            program = environment.program(environment.compile(self.expression))
            message = (
                environment.program(environment.compile(self.message_expression))
                if self.message_expression
                else None
            )
        except celpy.CELParseError as exc:
            raise RuleCompileError(f"rule {self.id}: not a valid CEL expression: {exc}") from None
        self._programs = (program, message)

    def evaluate(self, subject: Subject, previous: dict[str, Any] | None = None) -> str | None:
        """The violation message for `subject` (`previous`: its document before the
        change, if updated), or None when it complies."""
        import celpy

        if self._programs is None:
            self.compile()
        assert self._programs is not None
        program, message_program = self._programs
        view = resource_view(subject)
        before = resource_view(subject, previous) if previous else {}
        activation = {
            "resource": celpy.json_to_cel(view),
            "params": celpy.json_to_cel(self.params),
            "previous": celpy.json_to_cel(before),
        }
        try:
            result = program.evaluate(activation)
        except celpy.CELEvalError as exc:
            return f"rule could not be evaluated: {_error_text(exc)}"
        if isinstance(result, celpy.CELEvalError):
            return f"rule could not be evaluated: {_error_text(result)}"
        if not isinstance(result, celpy.celtypes.BoolType):
            return f"rule could not be evaluated: it returned {type(result).__name__}, not a bool"
        violated = not bool(result) if self.must_hold else bool(result)
        if not violated:
            return None
        if message_program is not None:
            try:
                text = message_program.evaluate(activation)
                if not isinstance(text, celpy.CELEvalError):
                    return str(text)
            except celpy.CELEvalError:
                pass
        return interpolate(self.message or self.name or self.id, {**view, "params": self.params})


def _error_text(error: Exception) -> str:
    args = getattr(error, "args", ())
    return str(args[0]) if args else str(error)


def resource_view(subject: Subject, document: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a rule sees of `subject` (with `document` in place of its own, if given)."""
    document = document if document is not None else subject.document
    metadata = document.get("metadata", {})
    return {
        "kind": subject.kind,
        "name": subject.name,
        "project": subject.project or "",
        "address": subject.address,
        "metadata": {
            "name": subject.name,
            "project": subject.project or "",
            "labels": dict(metadata.get("labels", {})),
            "annotations": dict(metadata.get("annotations", {})),
        },
        "spec": document.get("spec", {}),
    }


def interpolate(template: str, values: Mapping[str, Any]) -> str:
    """`{name}`, `{spec.queue}`, `{params.max}` replaced by values; unknown ones kept."""

    def lookup(match: re.Match[str]) -> str:
        value: Any = values
        for step in match.group(1).split("."):
            if isinstance(value, Mapping) and step in value:
                value = value[step]
            elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
                value = value[int(step)]
            else:
                return match.group(0)
        return str(value)

    return _PLACEHOLDER.sub(lookup, template)


def run_rule(rule: UserRule, context: PolicyContext) -> Iterator[tuple[Subject, str]]:
    for subject in context.subjects.values():
        if rule.kinds and subject.kind not in rule.kinds:
            continue
        message = rule.evaluate(subject, context.previous.get(subject.address))
        if message is not None:
            yield subject, message
