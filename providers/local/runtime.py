"""What `runtime: host` is on this machine: the identity of the Python a job's command runs.

The local supervisor runs a job's command as written (an argv list, no shell) with the PATH
of the trainform process (providers/local/environment.py passes PATH, HOME and a few more
on, nothing else), so `python3 train.py` starts the first `python3` on that PATH, which is
not necessarily the interpreter trainform itself runs under. `host_runtime` asks that
interpreter, in a subprocess with the same variables a job gets, what it is:
implementation, version, and its installed distributions (importlib.metadata; the first
of each name on sys.path, the one an import finds). The identity keeps those facts and
nothing that depends on where things are installed or which kernel runs: no path, no
`platform.platform()`. Two machines (or two install folders) with the same interpreter
and the same distributions have the same runtime digest, so a lock made on one is valid
on the other.

Called by the local provider (`resolve` and `_put` of a `runtime: host` Image). The answer
is cached per process: a CLI run asks once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.local.environment import INHERITED

# Run by the job's interpreter (any Python 3.8+): its facts as JSON on stdout. The current
# folder (`-c` puts it first on sys.path) is dropped, so files there cannot add or hide
# distributions. Name and Version are read from the metadata headers directly: parsing
# the whole of every METADATA file doubles the time this takes.
_PROBE = """\
import importlib.metadata, json, platform, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
found = []
for distribution in importlib.metadata.distributions():
    text = distribution.read_text("METADATA") or distribution.read_text("PKG-INFO") or ""
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key in ("Name", "Version"):
            fields.setdefault(key, value.strip())
    if fields.get("Name"):
        found.append([fields["Name"], fields.get("Version", "")])
print(json.dumps({
    "implementation": platform.python_implementation(),
    "python": platform.python_version(),
    "distributions": found,
}))
"""
_SEPARATORS = re.compile(r"[-_.]+")
INTERPRETER_NAMES = ("python3", "python")


def normalized_name(name: str) -> str:
    """A distribution name as the packaging standards compare them: `Foo_Bar` -> `foo-bar`."""
    return _SEPARATORS.sub("-", name).lower()


def runtime_identity(
    implementation: str, python: str, distributions: Iterable[tuple[str, str]]
) -> dict[str, Any]:
    """The recorded facts of an interpreter, from what it reports.

    `distributions` are (name, version) in sys.path order; the first of each normalized
    name counts (the one an import finds). `distributionsDigest` is the sha256 of the
    sorted `name==version` lines."""
    chosen: dict[str, str] = {}
    for name, version in distributions:
        chosen.setdefault(normalized_name(name), str(version))
    lines = sorted(f"{name}=={version}" for name, version in chosen.items())
    listing = "".join(line + "\n" for line in lines).encode()
    return {
        "implementation": implementation,
        "python": python,
        "distributionsDigest": "sha256:" + hashlib.sha256(listing).hexdigest(),
        "distributions": len(lines),
    }


def job_interpreter(path: str | None = None) -> str:
    """The interpreter a job's `python3` (else `python`) command finds on the PATH jobs
    get; trainform's own interpreter when there is none. Relative PATH entries are
    skipped: they would name a different program in each job's folder."""
    search = os.environ.get("PATH", "") if path is None else path
    absolute = os.pathsep.join(p for p in search.split(os.pathsep) if os.path.isabs(p))
    for name in INTERPRETER_NAMES:
        found = shutil.which(name, path=absolute)
        if found:
            return found
    return sys.executable


def host_runtime() -> dict[str, Any]:
    """The identity facts of the host runtime jobs run with (see the module docstring)."""
    environment = {name: os.environ[name] for name in INHERITED if name in os.environ}
    environment.update(PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
    # Never the spec folder: `python -c` puts its working directory first on sys.path, and
    # a pull request could shadow a module the probe imports. The root holds nothing a
    # spec can add.
    return dict(_probe(job_interpreter(), tuple(sorted(environment.items())), "/"))


@functools.lru_cache(maxsize=8)
def _probe(
    interpreter: str, environment: tuple[tuple[str, str], ...], cwd: str
) -> tuple[tuple[str, Any], ...]:
    remedy = "check that this interpreter starts, or put the one jobs should use first on PATH"
    try:
        result = subprocess.run(
            [interpreter, "-c", _PROBE],
            env=dict(environment),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PermanentProviderError(
            f"cannot describe the host runtime {interpreter}: {exc}; {remedy}"
        ) from None
    try:
        if result.returncode != 0:
            raise ValueError(result.stderr.strip()[-500:] or f"exit code {result.returncode}")
        facts = json.loads(result.stdout)
        identity = runtime_identity(
            str(facts["implementation"]),
            str(facts["python"]),
            [(str(name), str(version)) for name, version in facts["distributions"]],
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise PermanentProviderError(
            f"cannot describe the host runtime {interpreter}: {exc}; {remedy}"
        ) from None
    return tuple(identity.items())
