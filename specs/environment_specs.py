"""The specs as another environment renders them, without loading the folder again.

A document without templates reads the same in every environment; only the templated ones
(`SpecSet.templates`, kept by the loader as written) can differ. `environment_specs` renders
those with another environment's template variables (trainform.yaml's, the environment's,
--var-file, then --var: specs.loader.template_context), validates each, and returns that
environment's SpecSet: its configuration (its overrides laid over trainform.yaml), the
untemplated resources as loaded and the templated ones as it renders them. References are
not resolved again. planner/shared_writes.py compares environments with it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from trainform.specs.environments import environment_config
from trainform.specs.errors import Diagnostic, Location, Severity, SpecLoadError
from trainform.specs.loader import template_context
from trainform.specs.models.kinds import DOCUMENT_ADAPTER
from trainform.specs.resource import Resource, SpecSet, TemplatedDocument
from trainform.specs.template_rendering import render_document
from trainform.specs.templating import NestingTooDeep, RenderBudget


def environment_specs(
    specs: SpecSet,
    environment: str,
    variables: Iterable[str] | Mapping[str, Any] = (),
    var_files: Sequence[str | os.PathLike[str]] = (),
) -> SpecSet:
    """`specs` as `environment` reads them; SpecLoadError when one of its templated
    documents does not render or validate there (`validate --env` says why)."""
    if environment == specs.environment:
        return specs
    base = specs.base_config or specs.config
    _, context = template_context(base, environment, variables, var_files, [])
    resources = {a: r for a, r in specs.resources.items() if not r.templated}
    budget = RenderBudget()
    for template in specs.templates:
        resource = _rendered(template, context, budget)
        resources[resource.address] = resource
    return SpecSet(
        specs.root, environment_config(base, environment), environment, resources, specs.files,
        [], base, specs.templates,
    )  # fmt: skip


def _rendered(
    template: TemplatedDocument, context: dict[str, Any], budget: RenderBudget
) -> Resource:
    location = Location(template.file, template.line, 1)
    try:
        document, problems = render_document(template.document, context, budget)
        if problems:
            raise SpecLoadError([_failed(location, problems[0].message)])
        model = DOCUMENT_ADAPTER.validate_python(document)
    except NestingTooDeep:
        raise SpecLoadError([_failed(location, "nested too deeply")]) from None
    except ValidationError as exc:
        raise SpecLoadError([_failed(location, f"{exc.error_count()} invalid fields")]) from None
    return Resource(model.address, model, location, template.index, [], True)


def _failed(location: Location, cause: str) -> Diagnostic:
    return Diagnostic(
        Severity.ERROR, "invalid-document", f"cannot render document: {cause}", location
    )
