"""Options shared by several commands, declared once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

F = Callable[..., Any]


def spec_dir_argument(func: F) -> F:
    return click.argument("spec_dir", default=".", type=click.Path(file_okay=False, path_type=str))(
        func
    )


def template_options(func: F) -> F:
    func = click.option(
        "--var-file",
        "var_files",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False),
        help="YAML file of template variables (repeatable).",
    )(func)
    func = click.option(
        "--var",
        "variables",
        multiple=True,
        metavar="NAME=VALUE",
        help="Template variable (repeatable); wins over files and environments.",
    )(func)
    func = click.option(
        "--env",
        "environment",
        default=None,
        help="Environment from trainform.yaml whose variables templates see.",
    )(func)
    return func


def format_option(*choices: str, default: str = "text") -> Callable[[F], F]:
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="Output format.",
    )
