"""Names, ownership markers and unit conversions between trainform specs and Slurm.

Pure functions, no I/O; every other module of the Slurm provider uses them.

- Identifiers (accounts, QOS, partitions, users, nodes) are checked against a strict
  pattern before any command sees them: Slurm lowercases account, QOS and user names in
  its database, so trainform names are compared lowercased.
- Ownership: Slurm has no labels. Accounts and QOS carry `trainform:<manager>:<address>`
  in their Description, jobs carry it (plus run, attempt, kind) in their comment, and the
  managed partitions file carries one such marker line per block.
- Units: memory is bytes in specs and MiB in Slurm (`mem=4096M`); durations are seconds in
  specs and `[D-]HH:MM:SS` or minutes in Slurm; TRES strings are `cpu=4,mem=8G,gres/gpu=2`.
"""

from __future__ import annotations

import re
from decimal import Decimal

from trainform.providers.errors import PermanentProviderError
from trainform.specs.quantity import Duration

IDENTIFIER = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
HOSTLIST = re.compile(r"^[A-Za-z0-9_.\[][A-Za-z0-9_.,\[\]-]{0,999}$")
JOB_ID = re.compile(r"^[0-9]{1,12}([_+][0-9]{1,9})?$")
# An argument of sacctmgr's `key=value` syntax: no option, no quote or control character
# (each argv element is one argument to sacctmgr; plain spaces stay inside a Description).
SACCTMGR_ARGUMENT = re.compile(r"^[A-Za-z0-9_][^\t\n\r\v\f\x00-\x1f\x7f\"']*$")
FEATURE = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")
MARKER_PREFIX = "trainform:"
MIB = 2**20


def check_identifier(value: str, what: str) -> str:
    """`value` lowercased, or PermanentProviderError if Slurm could not hold it verbatim."""
    lowered = value.lower()
    if not IDENTIFIER.match(lowered):
        raise PermanentProviderError(
            f"cannot use {what} {value!r}: Slurm names here are 1-63 lowercase letters, "
            "digits, '-' or '_', starting with a letter or digit"
        )
    return lowered


def check_hostlist(value: str) -> str:
    """`value` if it is a Slurm hostlist scontrol reads as one (never as an option)."""
    if not HOSTLIST.match(value):
        raise PermanentProviderError(
            f"cannot use node list {value!r}: not a Slurm hostlist (letters, digits, "
            "'_', '.', ',', '-' and brackets, not starting with '-' or ',')"
        )
    return value


def check_node_name(value: str) -> str:
    if not NODE_NAME.match(value):
        raise PermanentProviderError(f"cannot use node name {value!r}: not a Slurm node name")
    return value


def check_job_id(value: str) -> str:
    """`value` if it is a Slurm job id (`123`, `123_4`, `123+1`): scancel and sacct take
    ids as positional values and have no `--` to end their options."""
    if not JOB_ID.match(value):
        raise PermanentProviderError(f"cannot use job id {value!r}: not a Slurm job id")
    return value


def check_sacctmgr_arguments(arguments: list[str]) -> list[str]:
    """`arguments` of a sacctmgr command after its verb, refused if any could read as an
    option (a leading `-`) or hold a quote or a control character: sacctmgr has no `--`,
    and strips quotes and splits lines on what such characters would add."""
    for argument in arguments:
        if not SACCTMGR_ARGUMENT.match(argument):
            raise PermanentProviderError(
                f"cannot run sacctmgr with argument {argument!r}: it starts with '-' or "
                "holds a quote or a control character"
            )
    return arguments


def check_feature(value: str) -> str:
    if not FEATURE.match(value):
        raise PermanentProviderError(f"cannot use node feature {value!r}: not a feature name")
    return value


def marker(manager: str, address: str) -> str:
    return f"{MARKER_PREFIX}{manager}:{address}"


def parse_marker(text: str) -> tuple[str, str] | None:
    """(manager, address) of a `trainform:<manager>:<address>` marker, else None."""
    text = text.strip()
    if not text.startswith(MARKER_PREFIX):
        return None
    manager, separator, address = text[len(MARKER_PREFIX) :].partition(":")
    if not separator or not manager or not address:
        return None
    return manager, address


# durations -----------------------------------------------------------------------------


def slurm_minutes(seconds: int) -> int:
    """Slurm limits count whole minutes; a partial minute rounds up."""
    return max(1, -(-seconds // 60))


def slurm_time(seconds: int) -> str:
    """`[D-]HH:MM:SS`, as Slurm prints and accepts time limits."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def parse_slurm_time(text: str) -> int | None:
    """Seconds of a Slurm time (`UNLIMITED`/empty -> None); minutes when a bare number."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE", "PARTITION_LIMIT"):
        return None
    days = 0
    if "-" in text:
        head, _, text = text.partition("-")
        days = int(head)
        parts = [int(p) for p in text.split(":")]
        while len(parts) < 3:
            parts.append(0)
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            return days * 86400 + parts[0] * 60
        if len(parts) == 2:
            parts = [0, *parts]
    hours, minutes, secs = parts
    return days * 86400 + hours * 3600 + minutes * 60 + secs


def duration_text(seconds: int) -> str:
    """The canonical trainform spelling of a span (`5400` -> `1h30m`)."""
    return Duration(f"{seconds}s").canonical


def seconds_of(text: str | None) -> int | None:
    return Duration(text).seconds if text else None


# memory and TRES -------------------------------------------------------------------------


def mebibytes(quantity: str) -> int:
    """Bytes (a canonical quantity) as whole MiB, rounded up (Slurm counts MiB)."""
    value = Decimal(quantity)
    return int(-(-value // MIB))


def bytes_of_mebibytes(mib: int) -> str:
    return str(mib * MIB)


def whole(quantity: str, what: str) -> int:
    value = Decimal(quantity)
    if value != value.to_integral_value():
        raise PermanentProviderError(f"cannot use {what} {quantity}: Slurm counts whole units")
    return int(value)


def render_tres(amounts: dict[str, str], gres: str = "gpu") -> str:
    """`{"gpu": "2", "cpu": "8", "memory": <bytes>}` -> `cpu=8,mem=16384M,gres/gpu=2`."""
    parts = []
    if amounts.get("cpu") is not None:
        parts.append(f"cpu={whole(amounts['cpu'], 'cpu')}")
    if amounts.get("memory") is not None:
        parts.append(f"mem={mebibytes(amounts['memory'])}M")
    if amounts.get("gpu") is not None:
        parts.append(f"gres/{gres}={whole(amounts['gpu'], 'gpu')}")
    return ",".join(parts)


_MEMORY_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def parse_tres(text: str, gres: str = "gpu") -> dict[str, str]:
    """The inverse of render_tres; unknown TRES are kept under their Slurm names."""
    amounts: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if name == "cpu":
            amounts["cpu"] = str(int(value))
        elif name == "mem":
            unit = value[-1].upper() if value and value[-1].isalpha() else "M"
            number = Decimal(value[:-1] if value and value[-1].isalpha() else value)
            amounts["memory"] = str(int(number * Decimal(str(_MEMORY_UNITS[unit])) * MIB))
        elif name in (f"gres/{gres}", "gres/gpu"):
            amounts["gpu"] = str(int(value))
        else:
            amounts[name] = value
    return amounts
