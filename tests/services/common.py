"""What every test server needs: free ports, waiting for a port, stopping by PID, and the
CI rule (missing is a failure in CI, a skip elsewhere)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(message: str) -> NoReturn:
    """Fail in CI, skip elsewhere."""
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing test server is a failure)", pytrace=False)
    pytest.skip(message)


def free_ports(count: int, avoid_offset: int = 0) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (and port+avoid_offset free too)."""
    chosen: list[int] = []
    holders = []
    try:
        while len(chosen) < count:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            if avoid_offset and (port + avoid_offset > 65535 or not _free(port + avoid_offset)):
                sock.close()
                continue
            holders.append(sock)
            chosen.append(port)
    finally:
        for sock in holders:
            sock.close()
    return chosen


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            unavailable(f"server exited with {process.returncode}; log:\n{_tail(log)}")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    stop(process)
    unavailable(f"server did not listen on port {port} within {timeout:.0f}s; log:\n{_tail(log)}")


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def launch(
    argv: Sequence[str], cwd: Path, log: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    handle = open(log, "wb")  # noqa: SIM115 - owned by the child process
    try:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    finally:
        handle.close()


def stop(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout)


def find_program(name: str, *extra: Path) -> str | None:
    """A program from the venv's bin folder, the extra folders, or PATH."""
    for folder in (Path(sys.executable).parent, *extra):
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)
