"""Running Slurm commands: argv lists only, SLURM_CONF set, timeouts, errors mapped.

`SlurmCommands.run` is the single place the Slurm provider starts a process. Every command
is an argv list (never a shell string) of a program from `bin_dir` or PATH; its
environment is this process's with SLURM_CONF pointed at the configured slurm.conf. A
command that cannot reach the controller or slurmdbd ("Unable to contact slurm
controller", "Socket timed out", connection refused) is retried with backoff, then
raised as TransientProviderError; any other failure is PermanentProviderError carrying
Slurm's own message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainform.providers.errors import (
    PermanentProviderError,
    ProviderConfigError,
    TransientProviderError,
)

TRANSIENT = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "slurm_persist_conn_open",
    "problem talking to the database",
    "resource temporarily unavailable",
    "slurm backup controller in standby mode",
    "unable to connect to database",
)


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        return (self.stdout + "\n" + self.stderr).strip()


def is_transient(message: str) -> bool:
    lowered = message.lower()
    return any(phrase in lowered for phrase in TRANSIENT)


class SlurmCommands:
    def __init__(
        self,
        bin_dir: str = "",
        conf: str = "",
        timeout: float = 60.0,
        attempts: int = 4,
        backoff: float = 0.5,
    ) -> None:
        self.bin_dir = bin_dir
        self.conf = conf
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff

    def program(self, name: str) -> str:
        if self.bin_dir:
            candidate = Path(self.bin_dir) / name
            if candidate.is_file():
                return str(candidate)
        found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/local/sbin")
        if found is None:
            raise ProviderConfigError(
                f"cannot run {name}: not found in {self.bin_dir or 'PATH'}; set bin_dir in "
                "the slurm provider's connection"
            )
        return found

    def environment(self, conf: str | None = None) -> dict[str, str]:
        env = dict(os.environ)
        chosen = conf if conf is not None else self.conf
        if chosen:
            env["SLURM_CONF"] = chosen
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        conf: str | None = None,
        retry: bool = True,
        timeout: float | None = None,
    ) -> Result:
        """Run one command; `check` raises on a non-zero exit (after transient retries)."""
        if isinstance(argv, str):  # a programming error, never a spec's fault
            raise TypeError("Slurm commands are argv lists, never shell strings")
        command = [self.program(argv[0]), *argv[1:]]
        chosen = conf if conf is not None else self.conf
        if chosen and not Path(chosen).is_file():
            # the commands would retry reading it for a minute before saying so
            raise ProviderConfigError(
                f"cannot run {argv[0]}: slurm.conf {chosen} does not exist on this machine"
            )
        delay = self.backoff
        tries = self.attempts if retry else 1
        result = Result(1, "", "")
        for attempt in range(tries):
            try:
                completed = subprocess.run(
                    command,
                    capture_output=True,
                    text=True,
                    timeout=timeout or self.timeout,
                    env=self.environment(conf),
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                result = Result(124, "", f"timed out after {timeout or self.timeout:.0f}s")
            except OSError as exc:
                raise ProviderConfigError(f"cannot run {argv[0]}: {exc}") from None
            else:
                result = Result(completed.returncode, completed.stdout, completed.stderr)
            if result.returncode == 0 or not (
                result.returncode == 124 or is_transient(result.text)
            ):
                break
            if attempt + 1 < tries:
                time.sleep(delay)
                delay *= 2
        if check and result.returncode != 0:
            cause = result.text or f"exit {result.returncode}"
            message = f"cannot run {' '.join(argv[:3])}: {cause}"
            if result.returncode == 124 or is_transient(result.text):
                raise TransientProviderError(message, retry_after=delay)
            raise PermanentProviderError(message)
        return result
