"""Terminal colour: on only for a terminal, off when NO_COLOR is set (https://no-color.org)
or the terminal says it cannot show it (TERM=dumb)."""

from __future__ import annotations

import os
import sys
from typing import IO


def use_color(stream: IO[str] | None = None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    target = stream or sys.stdout
    return hasattr(target, "isatty") and target.isatty()


_CODES = {"red": "31", "yellow": "33", "green": "32", "cyan": "36", "bold": "1", "dim": "2"}


def paint(text: str, style: str, enabled: bool) -> str:
    if not enabled:
        return text
    return f"\x1b[{_CODES[style]}m{text}\x1b[0m"
