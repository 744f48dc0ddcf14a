"""The command line, the top layer: `commands` holds the `trainform` group and `main`; one
module per command family (engine: plan/apply/destroy/show, state, drift, jobs, runs,
review, policies, project: init/fmt, refresh) with the shared `options` and `output`.
Nothing below cli imports from it (tests/test_layering.py)."""

from trainform.cli.commands import cli, main

__all__ = ["cli", "main"]
