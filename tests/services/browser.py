"""Headless Chromium (the Debian `chromium` package, installed by scripts/services.sh) driven
through Playwright's Python package. Playwright never downloads a browser here: it launches
/usr/bin/chromium with networking features off. Missing either is a skip, a failure in CI.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

from tests.services.common import unavailable

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def launch_chromium() -> Iterator[Any]:
    """A Playwright Browser for the session; closed with its Playwright driver."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the playwright package is not installed (pip install -e '.[test]')")
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is missing: run scripts/services.sh (Debian package chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
