"""The `trainform` console script: tunes the garbage collector, then runs the CLI.

Importing the spec models and loading a platform allocate millions of objects that live
until the command ends; with the default thresholds the cyclic collector rescans them over
and over (a fifth of a short command's time). So collection is off until the specs are
loaded; `cli.output.load_or_exit` then freezes what was loaded and turns
collection back on, rarely. This runs before anything heavy is imported, which is why it
is not in cli/__init__.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    from trainform.cli import main as run_cli

    run_cli()
