"""Load one side of a review into a SpecSet, naming files as the working tree does."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from trainform.policies.review.errors import RefLoadError
from trainform.policies.review.gitrefs import SpecSide
from trainform.specs import Diagnostic, Location, SpecLoadError, SpecSet, load_specs


def _relabel_location(side: SpecSide, location: Location | None) -> Location | None:
    if location is None:
        return None
    return dataclasses.replace(location, file=side.relabel(location.file))


def relabel_diagnostic(side: SpecSide, diagnostic: Diagnostic) -> Diagnostic:
    return dataclasses.replace(
        diagnostic,
        location=_relabel_location(side, diagnostic.location),
        related=tuple(
            loc
            for loc in (_relabel_location(side, item) for item in diagnostic.related)
            if loc is not None
        ),
    )


def load_side(
    side: SpecSide,
    environment: str | None = None,
    variables: Sequence[str] = (),
    var_files: Sequence[str] = (),
) -> SpecSet:
    """The specs of `side`; a RefLoadError (diagnostics named as in the worktree) if invalid."""
    try:
        return load_specs(
            side.folder, environment=environment, variables=variables, var_files=var_files
        )
    except SpecLoadError as error:
        relabelled = SpecLoadError([relabel_diagnostic(side, d) for d in error.diagnostics])
        raise RefLoadError(side.side, side.label, relabelled) from None
