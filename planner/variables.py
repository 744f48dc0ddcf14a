"""Template variables given on the command line: which are known, and what a plan keeps.

A `-var NAME=VALUE` must name a variable something reads: one declared in trainform.yaml
(its `variables` or any environment's) or one a templated spec document uses; any other
name is a mistake (`-var stpes=30`) and an error with the closest known name, never a
value silently ignored. Called by planner.workspace.open_workspace and the CLI's loads.

A saved plan keeps the `-var` values it was made with (`saved_variables`), so `apply FILE`
applies exactly the reviewed plan without retyping them; a variable whose name or value
looks secret is kept only as redacted, as Terraform keeps sensitive variables out of what
it prints, and must be given again to apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jinja2
from jinja2 import meta
from trainform.planner.errors import PlannerError
from trainform.specs import SpecSet
from trainform.specs.secrets import secret_reason
from trainform.specs.suggest import closest_name

REDACTED = "(sensitive)"


class UnknownVariableError(PlannerError):
    """A -var names a variable nothing reads."""


def _names_in(value: Any, parser: jinja2.Environment, found: set[str]) -> None:
    if isinstance(value, str):
        if "{" in value:
            try:
                found |= meta.find_undeclared_variables(parser.parse(value))
            except jinja2.TemplateSyntaxError:
                pass  # the loader already reported it
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _names_in(key, parser, found)
            _names_in(item, parser, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _names_in(item, parser, found)


def known_variables(specs: SpecSet) -> set[str]:
    """Names a -var may set: declared in trainform.yaml, or read by a templated document."""
    config = specs.base_config or specs.config
    names = {"environment", *config.variables}
    for environment in config.environments.values():
        names |= set(environment.variables)
    parser = jinja2.Environment()
    for template in specs.templates:
        _names_in(template.document, parser, names)
    return names


def parse_assignments(pairs: Iterable[str]) -> dict[str, str]:
    """NAME=VALUE pairs as given (malformed ones are left to the loader's error)."""
    found = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if sep and name.strip():
            found[name.strip()] = value
    return found


def check_variables(specs: SpecSet, pairs: Sequence[str]) -> None:
    """Raise UnknownVariableError naming every -var that nothing reads."""
    given = parse_assignments(pairs)
    if not given:
        return
    known = known_variables(specs)
    unknown = sorted(name for name in given if name not in known)
    if not unknown:
        return
    lines = []
    for name in unknown:
        suggestion = closest_name(name, sorted(known - {"environment"}))
        hint = f" (did you mean `{suggestion}`?)" if suggestion else ""
        lines.append(f"-var {name}: no variable of that name is declared or used{hint}")
    declared = ", ".join(sorted(known - {"environment"})) or "none"
    raise UnknownVariableError(
        "cannot use the variables given: "
        + "; ".join(lines)
        + f". Variables trainform.yaml declares or the specs use: {declared}"
    )


def saved_variables(pairs: Sequence[str]) -> dict[str, str]:
    """The -var values a saved plan keeps: secret-looking ones redacted."""
    return {
        name: REDACTED if secret_reason(name, value) else value
        for name, value in parse_assignments(pairs).items()
    }


def replayed_variables(saved: Mapping[str, str], given: Sequence[str]) -> tuple[str, ...]:
    """The -var pairs `apply FILE` loads the specs with: those given, else the plan's own;
    a redacted one must be given again."""
    if given:
        return tuple(given)
    missing = sorted(name for name, value in saved.items() if value == REDACTED)
    if missing:
        raise PlannerError(
            "cannot apply the saved plan: it was made with sensitive variables whose values "
            f"it does not keep ({', '.join(missing)}); pass every -var again to apply it"
        )
    return tuple(f"{name}={value}" for name, value in sorted(saved.items()))
