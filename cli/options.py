"""Options shared by several commands, declared once.

Terraform's single-dash spellings are accepted beside the double-dash ones (`-var`,
`-var-file`, `-target`, `-replace`, `-out`, `-destroy`, `-detailed-exitcode`,
`-auto-approve`, `-parallelism`, `-no-color`, `-lock-timeout`; some are declared with
their commands in cli.engine), so commands typed from Terraform habit work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

F = Callable[..., Any]


def spec_dir_argument(func: F) -> F:
    return click.argument("spec_dir", default=".", type=click.Path(file_okay=False, path_type=str))(
        func
    )


@dataclass(frozen=True)
class TemplateInputs:
    """What templates see besides trainform.yaml: --env, --var and --var-file."""

    environment: str | None = None
    variables: tuple[str, ...] = ()
    var_files: tuple[str, ...] = ()


ENV_VARIABLE = "TRAINFORM_ENV"
"""The environment variable that selects an environment when --env is not given."""


def env_option(func: F) -> F:
    """--env NAME (or TRAINFORM_ENV): the environment of trainform.yaml whose state and
    provider connections a command reaches; the one definition every command uses."""
    return click.option(
        "--env",
        "-env",
        "environment",
        default=None,
        envvar=ENV_VARIABLE,
        show_envvar=True,
        metavar="NAME",
        help="Environment of trainform.yaml to work on: its state, provider connections and "
        "variables (default: defaultEnvironment).",
    )(func)


def template_options(func: F) -> F:
    """--env, --var and --var-file, handed to the command as one `inputs` argument."""

    @functools.wraps(func)
    def command(
        *args: Any,
        environment: str | None,
        variables: tuple[str, ...],
        var_files: tuple[str, ...],
        **kwargs: Any,
    ) -> Any:
        return func(*args, inputs=TemplateInputs(environment, variables, var_files), **kwargs)

    wrapped: F = click.option(
        "--var-file",
        "-var-file",
        "var_files",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False),
        help="YAML file of template variables (repeatable).",
    )(command)
    wrapped = click.option(
        "--var",
        "-var",
        "variables",
        multiple=True,
        metavar="NAME=VALUE",
        help="Template variable (repeatable); wins over files and environments.",
    )(wrapped)
    return env_option(wrapped)


def format_option(*choices: str, default: str = "text") -> Callable[[F], F]:
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="Output format.",
    )


def policies_option(func: F) -> F:
    """--policies PATH (validate, plan, apply, review): the trusted policy folder."""
    return click.option(
        "--policies",
        "policies_path",
        type=click.Path(exists=True, path_type=Path),
        default=None,
        metavar="PATH",
        help="Trusted policy folder (holding policies.yaml, tenancy settings included), e.g. "
        "the base branch checkout in CI; never read from the change under review. Default: "
        "the policies section of trainform.yaml (for review: the base ref's).",
    )(func)


def markdown_budget_option(func: F) -> F:
    """--max-chars N: the size budget of Markdown output (plan, show)."""
    from trainform.cli.render.plan_markdown import DEFAULT_BUDGET, MIN_BUDGET

    return click.option(
        "--max-chars",
        "budget",
        type=click.IntRange(min=MIN_BUDGET),
        default=DEFAULT_BUDGET,
        show_default=True,
        metavar="N",
        help="Markdown only: keep the output under N characters (a PR comment), leaving out "
        "whole resource changes from the end and saying how many.",
    )(func)


MIN_TEXT_CHARS = 2_000
"""The smallest --max-chars of text output: the counts and the note must fit."""


def text_budget_option(func: F) -> F:
    """--max-chars N (validate): the size budget of its text output; unbounded by default
    beyond the run's budget of diagnostics (specs.diagnostic_budget)."""
    return click.option(
        "--max-chars",
        "max_chars",
        type=click.IntRange(min=MIN_TEXT_CHARS),
        default=None,
        metavar="N",
        help="Text only: keep the output under N characters, leaving out whole diagnostics "
        "from the end and saying how many (a run shows at most 1,000 in any case).",
    )(func)


def _no_color(context: click.Context, parameter: click.Parameter, value: bool) -> None:
    if value:
        import os

        os.environ["NO_COLOR"] = "1"  # cli.render.style.use_color reads it


def no_color_option(func: F) -> F:
    """--no-color (-no-color): plain output even on a terminal, as NO_COLOR=1 does."""
    return click.option(
        "--no-color",
        "-no-color",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_no_color,
        help="No colour in the output, even on a terminal (same as NO_COLOR=1).",
    )(func)


def _lock_timeout(context: click.Context, parameter: click.Parameter, value: str) -> None:
    from trainform.planner.backends.base import StateBackend
    from trainform.specs.quantity import Duration

    try:
        seconds = float(value) if value.replace(".", "", 1).isdigit() else Duration(value).seconds
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a duration (e.g. 30s, 5m, 1h30m, or seconds)"
        ) from None
    StateBackend.lock_timeout = float(seconds)


def lock_timeout_option(func: F) -> F:
    """--lock-timeout DURATION (-lock-timeout): wait that long for a held state lock."""
    return click.option(
        "--lock-timeout",
        "-lock-timeout",
        default="0s",
        show_default=True,
        metavar="DURATION",
        expose_value=False,
        callback=_lock_timeout,
        help="How long to keep retrying when another run holds the state lock (30s, 5m).",
    )(func)


def _provider_timeout(context: click.Context, parameter: click.Parameter, value: str) -> None:
    from trainform.planner.refresh import RefreshSettings
    from trainform.specs.quantity import Duration

    try:
        seconds = float(value) if value.replace(".", "", 1).isdigit() else Duration(value).seconds
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a duration (e.g. 5s, 1m, or seconds)") from None
    if seconds <= 0:
        raise click.BadParameter("the timeout must be above 0 s")
    RefreshSettings.timeout = float(seconds)


def timeout_option(func: F) -> F:
    """--timeout DURATION: how long each provider instance has to answer its reads."""
    return click.option(
        "--timeout",
        default="10s",
        show_default=True,
        metavar="DURATION",
        expose_value=False,
        callback=_provider_timeout,
        help="How long each provider has to answer a batch of reads before it is reported as "
        "not answering (providers are read in parallel).",
    )(func)


def refresh_only_option(func: F) -> F:
    """--refresh-only (-refresh-only): accept live values into state instead of planning."""
    return click.option(
        "--refresh-only",
        "-refresh-only",
        "refresh_only",
        is_flag=True,
        help="Only bring state up to date with the live platform: record the live values of "
        "what changed outside trainform and forget what vanished, changing no provider "
        "(plan shows it, apply records it after confirmation).",
    )(func)
