"""Facts of this machine, read once: CPUs, memory, GPUs (nvidia-smi, when present)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class MachineFacts:
    cpus: int
    memory_bytes: int
    gpus: tuple[str, ...]

    @property
    def cpu(self) -> Decimal:
        return Decimal(self.cpus)


def _memory_bytes() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _gpus() -> tuple[str, ...]:
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return ()
    try:
        result = subprocess.run(
            [binary, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if result.returncode != 0:
        return ()
    return tuple(line.strip() for line in result.stdout.splitlines() if line.strip())


def read_machine_facts() -> MachineFacts:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return MachineFacts(cpus=cpus or 1, memory_bytes=_memory_bytes(), gpus=_gpus())
