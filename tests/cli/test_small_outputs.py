"""Small output rules: TERM=dumb gets no colour even on a terminal; byte counts in
messages read as sizes, never as raw numbers."""

from __future__ import annotations

import io

import pytest
from trainform.cli.render.style import use_color
from trainform.specs.quantity import binary_size


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_dumb_terminal_gets_no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert use_color(Terminal())
    monkeypatch.setenv("TERM", "dumb")
    assert not use_color(Terminal())


@pytest.mark.parametrize(
    ("count", "text"),
    [
        pytest.param(512, "512 B", id="bytes"),
        pytest.param(1536, "1.5 KiB", id="kib"),
        pytest.param(4294967296000, "3.9 TiB", id="tib"),
        pytest.param(2**60, "1,024.0 PiB", id="beyond"),
    ],
)
def test_byte_counts_read_as_sizes(count: int, text: str) -> None:
    assert binary_size(count) == text
